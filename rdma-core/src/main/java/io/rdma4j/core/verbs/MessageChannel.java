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
 * Two-sided messages over one queue pair, with credits: a side sends only while it holds credits (the peer's
 * free receive slots), which come back in every message header or in a credit-only message, so a SEND never
 * finds no receive posted (iWARP has no RNR retry and would fail the queue pair). Messages are copied into
 * registered staging slots. Every method but {@link #read} runs under the connection's lock.
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
    /** Receive slots beyond the data credits, for credit-only messages (at most 2 are ever in flight). */
    static final int EXTRA_SLOTS = 4;
    static final int FLAG_DATA = 0;
    static final int FLAG_CREDIT = 1;
    /** A proof of the shared secret ({@link ProofExchange}): never application data. */
    static final int FLAG_PROOF = 2;

    /** What the peer announced when connecting; {@code nonce} is null when it does not authenticate. */
    record PeerParameters(int maxMessageSize, int receiveDepth, byte[] nonce) {
        boolean authenticates() {
            return nonce != null;
        }
    }

    /**
     * A message received in a slot: the credits it returned and its payload (null for a credit-only one); a proof's
     * payload is the proof. A proof counts against credits as a data message does.
     */
    record Received(int returnedCredits, ByteBuffer payload, boolean proof) {
    }

    /** A message waiting for a credit. */
    record Waiting(ByteBuffer payload, CompletableFuture<Void> future) {
    }

    private final QueuePairResources resources;
    private final PostedRequests posted;
    private final int receiveDepth;
    private final ArrayDeque<Integer> freeSendSlots = new ArrayDeque<>();
    private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();
    private int credits;
    /** The most credits this side can hold: the peer's data receive slots it may use. */
    private int creditLimit;
    /** How many data messages the peer may still send, as this side counts them: below zero it broke the protocol. */
    private int peerCredits;
    private int owedCredits;
    private int peerMaxMessageSize;

    MessageChannel(QueuePairResources resources, PostedRequests posted, int receiveDepth) {
        this.resources = resources;
        this.posted = posted;
        this.receiveDepth = receiveDepth;
        for (int i = 0; i < resources.sendSlots; i++) {
            freeSendSlots.add(i);
        }
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

    /** Posts every receive slot: before the connection can be established. */
    void postReceives() {
        for (int i = 0; i < resources.receiveSlots; i++) {
            postReceive(i);
        }
    }

    /** The peer's side of the handshake: its credits and largest message. */
    void open(PeerParameters peer) {
        creditLimit = Math.min(peer.receiveDepth(), receiveDepth);
        credits = creditLimit;
        peerCredits = creditLimit;
        peerMaxMessageSize = peer.maxMessageSize();
    }

    private void postReceive(int slot) {
        int rc = resources.receiveQueue.post(slot);
        if (rc != 0) {
            throw new RdmaException("ibv_post_recv failed: " + Errno.name(rc));
        }
    }

    /** Sends {@code message} now if a credit allows, else once one comes back. */
    void send(ByteBuffer message, CompletableFuture<Void> f) {
        if (message.remaining() > peerMaxMessageSize) {
            f.completeExceptionally(new IllegalArgumentException("message of " + message.remaining()
                    + " bytes exceeds the peer's max-message-size " + peerMaxMessageSize));
            return;
        }
        if (credits > 0 && waiting.isEmpty()) {
            credits--;
            post(message, f, FLAG_DATA);
        } else {
            waiting.add(new Waiting(message, f));
        }
    }

    /**
     * Sends this side's proof of the shared secret: the first message of either side, so a credit is always there.
     */
    void sendProof(byte[] proof) {
        if (credits <= 0 || !waiting.isEmpty() || freeSendSlots.isEmpty()) {
            throw new IllegalStateException("no credit for the proof of the shared secret: it must be the first message");
        }
        credits--;
        post(ByteBuffer.wrap(proof), null, FLAG_PROOF);
    }

    /** A send staging slot is free again (its SEND completed). */
    void slotFreed(int slot) {
        freeSendSlots.add(slot);
    }

    /** Copies into a staging slot and posts a signalled SEND carrying the owed credits. */
    private void post(ByteBuffer payload, CompletableFuture<Void> f, int flag) {
        Integer slot = freeSendSlots.poll();
        if (slot == null) {
            throw new IllegalStateException("no free send slot although credits allowed a send");
        }
        MemorySegment s = resources.sendSlot(slot);
        int length = payload == null ? 0 : payload.remaining();
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 0, owedCredits);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 4, flag);
        peerCredits += owedCredits;
        owedCredits = 0;
        if (length > 0) {
            s.asSlice(HEADER, length).copyFrom(MemorySegment.ofBuffer(payload));
        }
        int rc = resources.sendQueue.postSend(posted.nextId(), s.address(), HEADER + length, resources.sendLkey());
        if (rc != 0) {
            freeSendSlots.add(slot);
            if (f != null) {
                f.completeExceptionally(new RdmaException("ibv_post_send of a message failed: " + Errno.name(rc)));
            }
            return;
        }
        posted.add(flag == FLAG_DATA ? "send" : flag == FLAG_PROOF ? "proof" : "credit update", f, slot);
    }

    /** Sends waiting messages while credits last, else a credit-only message when half are owed. */
    void flush() {
        while (credits > 0 && !waiting.isEmpty() && !freeSendSlots.isEmpty()) {
            Waiting m = waiting.poll();
            credits--;
            post(m.payload(), m.future(), FLAG_DATA);
        }
        if (owedCredits >= Math.max(1, receiveDepth / 2) && waiting.isEmpty() && !freeSendSlots.isEmpty()) {
            post(null, null, FLAG_CREDIT);
        }
    }

    /**
     * Without the lock: what receive slot {@code slot} holds after a receive of {@code byteLength} bytes.
     *
     * @throws ProtocolException when the message is shorter than its header, its flag is unknown, a credit-only
     *                           message carries a payload, or the payload exceeds this side's slot
     */
    Received read(int slot, int byteLength) {
        MemorySegment s = resources.receiveSlot(slot);
        int returned = s.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
        int flag = s.get(ValueLayout.JAVA_INT_UNALIGNED, 4);
        // the length is checked first: a short message leaves the slot's earlier header in place
        checkLength(byteLength, flag, resources.slotSize);
        if (flag == FLAG_CREDIT) {
            return new Received(returned, null, false);
        }
        int length = byteLength - HEADER;
        ByteBuffer message = ByteBuffer.allocate(length);
        MemorySegment.ofBuffer(message).copyFrom(s.asSlice(HEADER, length));
        return new Received(returned, message, flag == FLAG_PROOF);
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
        if (flag != FLAG_DATA && flag != FLAG_CREDIT && flag != FLAG_PROOF) {
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
     * Checks {@code received}'s credits, then reposts its slot, takes the credits and sends what they allow.
     *
     * @throws ProtocolException when the peer returned credits it cannot have, or sent without one
     */
    void accept(int slot, Received received) {
        int newCredits = creditsAfter(credits, received.returnedCredits(), creditLimit);
        int newPeerCredits = received.payload() == null ? peerCredits : peerCreditsAfterData(peerCredits, creditLimit);
        postReceive(slot);
        credits = newCredits;
        peerCredits = newPeerCredits;
        if (received.payload() != null) {
            owedCredits++;
        }
        flush();
    }

    /** Removes the messages still waiting for a credit. */
    List<Waiting> drainWaiting() {
        List<Waiting> all = new ArrayList<>(waiting);
        waiting.clear();
        return all;
    }
}
