package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.nativeloader.Errno;
import io.rdma4j.nativeloader.RdmaCm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Two-sided messages over one queue pair, in fragments of one receive slot, with credits: a side sends a fragment
 * only while it holds a credit (a receive the peer keeps posted for it in its {@link ReceivePool}), and credits come
 * back in every fragment's header or in a credit-only message, so a SEND never finds no receive posted (iWARP has
 * no RNR retry and would fail the queue pair). Fragments are copied into the transport's registered staging slots
 * ({@link StagingPool}) and put together again on the receiving side ({@link MessageAssembly}); a fragment says
 * whether more of its message follow and whether the sender has more waiting, which earns it credits lent from the
 * peer's shared pool. Every method but {@link #read} runs under the connection's lock.
 */
final class MessageChannel {

    /**
     * Connect private data: magic+version, max message size, receive depth (data credits). Version 1 is what a side
     * without a shared secret sends, as rdma4j did before authentication; version 2 adds flags and a nonce and is
     * sent with a shared secret, so that a peer too old to authenticate refuses it by its version, naming both.
     */
    static final int MAGIC_V1 = 0x52344A01; // "R4J" v1
    static final int MAGIC_V2 = 0x52344A02; // "R4J" v2
    static final int PRIVATE_DATA_LENGTH = 12;
    /** Version 2: version 1's fields, flags, the nonce (within RC's 56 bytes of connect request private data). */
    static final int PRIVATE_DATA_V2_LENGTH = PRIVATE_DATA_LENGTH + 4 + 16;
    static final int NONCE_BYTES = 16;
    /** Version 2 flag: this side has a shared secret and requires the peer to prove it. */
    static final int CONNECT_FLAG_AUTH = 1;
    /** Each slot starts with the credits returned and the flag. */
    static final int HEADER = 8;
    /** Payload bytes of a full fragment: a slot is 4 KiB with its header. */
    static final int FRAGMENT_PAYLOAD = 4096 - HEADER;
    /**
     * The fewest owed credits a credit-only message returns; it waits for half of what the peer was granted when that
     * is more, so that at most two are in flight ({@link ReceivePool#CONTROL_SLOTS}).
     */
    static final int CREDIT_THRESHOLD = 2;
    /** The flag's low byte: what the fragment is. */
    static final int KIND = 0xff;
    static final int FLAG_DATA = 0;
    static final int FLAG_CREDIT = 1;
    /** A proof of the shared secret ({@link ProofExchange}): never application data, never in fragments. */
    static final int FLAG_PROOF = 2;
    /** More fragments of this message follow. */
    static final int FLAG_MORE = 0x100;
    /** The sender has more to send after this fragment: the receiver lends it credits from its shared pool. */
    static final int FLAG_BACKLOG = 0x200;

    /** What the peer announced when connecting; {@code nonce} is null when it does not authenticate. */
    record PeerParameters(int maxMessageSize, int receiveDepth, byte[] nonce) {
        boolean authenticates() {
            return nonce != null;
        }
    }

    /**
     * What a received fragment gave: the credits it returned and, once its last fragment came, the message (null
     * for a credit-only one, {@code complete} false while fragments are missing); a proof's payload is the proof.
     * A proof counts against credits as a data message does.
     */
    record Received(int returnedCredits, ByteBuffer payload, boolean proof, boolean complete) {
        /** A fragment that leaves its message incomplete. */
        static final Received PARTIAL = new Received(0, ByteBuffer.allocate(0), false, false);

        Received(int returnedCredits, ByteBuffer payload, boolean proof) {
            this(returnedCredits, payload, proof, true);
        }
    }

    /** One received fragment, copied out of its slot: {@code bytes} null for a credit-only message. */
    record Fragment(int returnedCredits, int flag, ByteBuffer bytes) {
    }

    /** A message waiting for a credit. */
    record Waiting(ByteBuffer payload, CompletableFuture<Void> future) {
    }

    private final QueuePairResources resources;
    private final ReceivePool receives;
    private final StagingPool staging;
    private final PostedRequests posted;
    private final int receiveDepth;
    private final MessageAssembly message;
    private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();
    private int credits;
    /** The most credits this side can hold: the peer's data receive slots it may use. */
    private int creditLimit;
    /** How many data messages the peer may still send, as this side counts them: below zero it broke the protocol. */
    private int peerCredits;
    private int owedCredits;
    /** Of the peer's credits (held, in flight or owed), those lent from the shared pool. */
    private int lentCredits;
    private int peerMaxMessageSize;
    private int fragmentPayload;

    MessageChannel(QueuePairResources resources, ReceivePool receives, StagingPool staging, PostedRequests posted,
                   int receiveDepth, int maxMessageSize) {
        this.resources = resources;
        this.receives = receives;
        this.staging = staging;
        this.posted = posted;
        this.receiveDepth = receiveDepth;
        this.message = new MessageAssembly(maxMessageSize);
    }

    /**
     * This side's parameters for rdma_connect / rdma_accept: its private data, and 7 transport retries; credits
     * make RNR impossible, so infinite RNR retry (7) is only a backstop.
     */
    static RdmaCm.ConnectionParameters connectionParameters(int maxMessageSize, int receiveDepth, byte[] nonce,
                                                          int responderResources, int initiatorDepth) {
        return new RdmaCm.ConnectionParameters(privateData(maxMessageSize, receiveDepth, nonce), responderResources,
                initiatorDepth, 7, 7);
    }

    /** This side's private data without a shared secret (version 1): magic, max message size, receive depth. */
    static byte[] privateData(int maxMessageSize, int receiveDepth) {
        return privateData(maxMessageSize, receiveDepth, null);
    }

    /**
     * This side's private data: version 1 without a nonce; with one (a shared secret) version 2, which adds the
     * flags ({@link #CONNECT_FLAG_AUTH}) and the nonce.
     */
    static byte[] privateData(int maxMessageSize, int receiveDepth, byte[] nonce) {
        if (nonce == null) {
            return ByteBuffer.allocate(PRIVATE_DATA_LENGTH).order(ByteOrder.BIG_ENDIAN)
                    .putInt(MAGIC_V1).putInt(maxMessageSize).putInt(receiveDepth).array();
        }
        if (nonce.length != NONCE_BYTES) {
            throw new IllegalArgumentException("nonce of " + nonce.length + " bytes, expected " + NONCE_BYTES);
        }
        return ByteBuffer.allocate(PRIVATE_DATA_V2_LENGTH).order(ByteOrder.BIG_ENDIAN).putInt(MAGIC_V2)
                .putInt(maxMessageSize).putInt(receiveDepth).putInt(CONNECT_FLAG_AUTH).put(nonce).array();
    }

    /**
     * Reads and checks the peer's private data; a peer announcing a receive depth or message size this side
     * cannot honour is refused before anything is sized by them.
     */
    static PeerParameters peer(byte[] privateData) {
        if (privateData.length < PRIVATE_DATA_LENGTH) {
            throw new ProtocolException("peer sent " + privateData.length + " bytes of connection data, expected "
                    + PRIVATE_DATA_LENGTH + " (not an rdma4j verbs peer?)");
        }
        ByteBuffer b = ByteBuffer.wrap(privateData).order(ByteOrder.BIG_ENDIAN);
        int magic = b.getInt();
        if (magic != MAGIC_V1 && magic != MAGIC_V2) {
            throw new ProtocolException("peer speaks protocol 0x" + Integer.toHexString(magic) + ", this side 0x"
                    + Integer.toHexString(MAGIC_V1) + " or 0x" + Integer.toHexString(MAGIC_V2)
                    + ": use the same rdma4j version on both sides");
        }
        int maxMessageSize = b.getInt();
        int receiveDepth = b.getInt();
        byte[] nonce = null;
        if (magic == MAGIC_V2) {
            if (privateData.length < PRIVATE_DATA_V2_LENGTH) {
                throw new ProtocolException("peer sent " + privateData.length + " bytes of version 2 connection data,"
                        + " expected " + PRIVATE_DATA_V2_LENGTH + ": not an rdma4j verbs peer, or a corrupted one");
            }
            int flags = b.getInt();
            if ((flags & ~CONNECT_FLAG_AUTH) != 0) {
                throw new ProtocolException("peer announced unknown connection flags 0x" + Integer.toHexString(flags)
                        + ": use the same rdma4j version on both sides");
            }
            if ((flags & CONNECT_FLAG_AUTH) != 0) {
                nonce = new byte[NONCE_BYTES];
                b.get(nonce);
            }
        }
        if (maxMessageSize < 1 || maxMessageSize > Integer.MAX_VALUE - HEADER) {
            throw new ProtocolException("peer announced a max-message-size of " + maxMessageSize
                    + " bytes in its connection data: not an rdma4j verbs peer, or a corrupted one");
        }
        if (receiveDepth < VerbsOptions.MIN_RECEIVE_DEPTH || receiveDepth > VerbsOptions.MAX_RECEIVE_DEPTH) {
            throw new ProtocolException("peer announced a receive depth of " + receiveDepth + " in its connection data, outside ["
                    + VerbsOptions.MIN_RECEIVE_DEPTH + ", " + VerbsOptions.MAX_RECEIVE_DEPTH
                    + "]: not an rdma4j verbs peer, or a corrupted one");
        }
        return new PeerParameters(maxMessageSize, receiveDepth, nonce);
    }

    /** The peer's side of the handshake: its credit limit and largest message; it starts with the reserved credits. */
    void open(PeerParameters peer) {
        creditLimit = Math.min(peer.receiveDepth(), receiveDepth);
        credits = Math.min(ReceivePool.RESERVED_CREDITS, creditLimit);
        peerCredits = credits;
        peerMaxMessageSize = peer.maxMessageSize();
        fragmentPayload = fragmentPayload(peerMaxMessageSize);
    }

    /** Payload bytes per fragment for a receiver of {@code maxMessageSize}: its slot, less the header. */
    static int fragmentPayload(int maxMessageSize) {
        return Math.min(FRAGMENT_PAYLOAD, maxMessageSize);
    }

    /** The receive slot of a side with {@code maxMessageSize}: one fragment and its header. */
    static int slotSize(int maxMessageSize) {
        return HEADER + fragmentPayload(maxMessageSize);
    }

    /** Sends {@code message} as the credits allow: now, or fragment by fragment as they come back. */
    void send(ByteBuffer message, CompletableFuture<Void> f) {
        if (message.remaining() > peerMaxMessageSize) {
            f.completeExceptionally(new IllegalArgumentException("message of " + message.remaining()
                    + " bytes exceeds the peer's max-message-size " + peerMaxMessageSize));
            return;
        }
        waiting.add(new Waiting(message.duplicate(), f));
        flush();
    }

    /**
     * Sends this side's proof of the shared secret: the first message of either side, so a credit is always there.
     */
    void sendProof(byte[] proof) {
        if (credits <= 0 || !waiting.isEmpty() || proof.length > fragmentPayload) {
            throw new IllegalStateException("no credit for the proof of the shared secret: it must be the first message");
        }
        credits--;
        post(ByteBuffer.wrap(proof), proof.length, null, FLAG_PROOF);
    }

    /** A send staging slot is free again (its SEND completed). */
    void slotFreed(int slot) {
        staging.free(slot);
    }

    /** Copies one fragment into a staging slot and posts a signalled SEND carrying the owed credits. */
    private void post(ByteBuffer payload, int length, CompletableFuture<Void> f, int flag) {
        int slot = staging.take();
        MemorySegment s = staging.slot(slot);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 0, owedCredits);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 4, flag);
        peerCredits += owedCredits;
        owedCredits = 0;
        if (length > 0) {
            s.asSlice(HEADER, length).copyFrom(MemorySegment.ofBuffer(payload).asSlice(0, length));
            payload.position(payload.position() + length);
        }
        int rc = resources.sendQueue.postSend(posted.nextId(), s.address(), HEADER + length, staging.lkey(slot));
        if (rc != 0) {
            staging.free(slot);
            if (f != null) {
                f.completeExceptionally(new RdmaException("ibv_post_send of a message failed: " + Errno.name(rc)));
            }
            return;
        }
        posted.add(flag == FLAG_CREDIT ? "credit update" : (flag & KIND) == FLAG_PROOF ? "proof" : "send", f, slot);
    }

    /**
     * Sends waiting fragments while credits last, each saying whether more follow (of its message, or of others);
     * then a credit-only message when half the credits granted (at least {@link #CREDIT_THRESHOLD}) are owed and no
     * data carries them.
     */
    void flush() {
        while (credits > 0 && !waiting.isEmpty()) {
            Waiting m = waiting.peek();
            int length = Math.min(m.payload().remaining(), fragmentPayload);
            boolean more = m.payload().remaining() > length;
            int flag = FLAG_DATA | (more ? FLAG_MORE : 0) | (more || waiting.size() > 1 ? FLAG_BACKLOG : 0);
            credits--;
            if (!more) {
                waiting.poll();
            }
            post(m.payload(), length, more ? null : m.future(), flag);
        }
        // Also with messages waiting, when no credit is left to carry the owed ones: both sides out of credits and
        // owing each other would otherwise wait forever.
        int granted = peerCredits + owedCredits;
        if (owedCredits >= Math.max(CREDIT_THRESHOLD, granted / 2) && (waiting.isEmpty() || credits == 0)) {
            post(null, 0, null, FLAG_CREDIT);
        }
    }

    /**
     * Without the lock: the fragment a receive slot holds after a receive of {@code byteLength} bytes, copied out.
     *
     * @throws ProtocolException when the message is shorter than its header, its flag is unknown, a credit-only
     *                           message carries a payload, or the payload exceeds the slot
     */
    static Fragment read(MemorySegment slot, int byteLength) {
        int returned = slot.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
        int flag = slot.get(ValueLayout.JAVA_INT_UNALIGNED, 4);
        // the length is checked first: a short message leaves the slot's earlier header in place
        checkLength(byteLength, flag, (int) slot.byteSize());
        if (flag == FLAG_CREDIT) {
            return new Fragment(returned, flag, null);
        }
        ByteBuffer bytes = ByteBuffer.allocate(byteLength - HEADER);
        MemorySegment.ofBuffer(bytes).copyFrom(slot.asSlice(HEADER, byteLength - HEADER));
        return new Fragment(returned, flag, bytes);
    }

    /** Checks a received message's length against its flag and the slot size, before its header is trusted. */
    static void checkLength(int byteLength, int flag, int slotSize) {
        if (byteLength < HEADER) {
            throw new ProtocolException("peer sent a message of " + byteLength + " bytes, shorter than the " + HEADER
                    + "-byte rdma4j verbs header: not an rdma4j verbs peer, or a corrupted one");
        }
        if (byteLength > slotSize) {
            throw new ProtocolException("peer sent a message of " + byteLength + " bytes into a slot of " + slotSize
                    + ": it ignores this side's max-message-size");
        }
        if (flag == FLAG_CREDIT && byteLength != HEADER) {
            throw new ProtocolException("peer sent a credit-only message with " + (byteLength - HEADER)
                    + " payload bytes: not an rdma4j verbs peer, or a corrupted one");
        }
        int kind = flag & KIND;
        boolean known = (flag & ~(KIND | FLAG_MORE | FLAG_BACKLOG)) == 0
                && (kind == FLAG_DATA || kind == FLAG_PROOF && (flag & FLAG_MORE) == 0 || flag == FLAG_CREDIT);
        if (!known) {
            throw new ProtocolException("peer sent a message with unknown flag " + flag
                    + ": not an rdma4j verbs peer, or a corrupted one");
        }
    }

    /**
     * The credits held after the peer returns {@code returned}: never negative, never more than the peer's
     * slots ({@code limit}), which an honest peer cannot exceed since it returns only what this side used.
     */
    static int creditsAfter(int credits, int returned, int limit) {
        if (returned < 0 || (long) credits + returned > limit) {
            throw new ProtocolException("peer returned " + returned + " credits while this side holds " + credits
                    + " of at most " + limit + ": not an rdma4j verbs peer, or a corrupted one");
        }
        return credits + returned;
    }

    /** The peer's credits after it sent one more data message: it sent without a credit when none is left. */
    static int peerCreditsAfterData(int peerCredits, int limit) {
        if (peerCredits <= 0) {
            throw new ProtocolException("peer sent a message without a credit (more than " + limit
                    + " unanswered): not an rdma4j verbs peer, or a corrupted one");
        }
        return peerCredits - 1;
    }

    /**
     * Takes {@code fragment}'s credits, counts the credit it used (lending more when its peer has more to send) and
     * adds it to the message it belongs to; sends what the credits allow. Returns the message a last fragment
     * completes, a credit-only message, or {@link Received#PARTIAL}.
     *
     * @throws ProtocolException when the peer returned credits it cannot have, sent without one, or sent a message
     *                           longer than this side's max-message-size
     */
    Received accept(Fragment fragment) {
        int newCredits = creditsAfter(credits, fragment.returnedCredits(), creditLimit);
        if (fragment.bytes() == null) {
            credits = newCredits;
            flush();
            return new Received(fragment.returnedCredits(), null, false);
        }
        int newPeerCredits = peerCreditsAfterData(peerCredits, creditLimit);
        credits = newCredits;
        peerCredits = newPeerCredits;
        creditUsed((fragment.flag() & FLAG_BACKLOG) != 0);
        Received r = message.add(fragment);
        flush();
        return r;
    }

    /**
     * The peer used a credit: a lent one goes back to the pool, a reserved one back to the peer; a peer with more to
     * send is lent more, up to the credit limit.
     */
    private void creditUsed(boolean backlog) {
        if (lentCredits > 0) {
            lentCredits--;
            receives.giveBack(1);
        } else {
            owedCredits++;
        }
        if (backlog) {
            int allocated = peerCredits + owedCredits;
            int lent = receives.lend(creditLimit - allocated);
            lentCredits += lent;
            owedCredits += lent;
        }
    }

    /** Credits the shared pool lent this connection: given back when it closes. */
    int lentCredits() {
        return lentCredits;
    }

    /** Removes the messages still waiting for a credit. */
    List<Waiting> drainWaiting() {
        List<Waiting> all = new ArrayList<>(waiting);
        waiting.clear();
        return all;
    }
}
