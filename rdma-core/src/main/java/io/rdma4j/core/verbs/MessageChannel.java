package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.nativeloader.Errno;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
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
 * peer's shared pool. A side that stopped sending gives back what it was lent ({@link #releaseIdleCredits}).
 * Every method but {@link #read} runs under the connection's lock.
 */
final class MessageChannel {

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
    /**
     * Gives back unused credits: it uses a credit as data does, and its payload (an int) names how many more the
     * sender gives up. Never application data.
     */
    static final int FLAG_RELEASE = 3;
    static final int RELEASE_LENGTH = HEADER + Integer.BYTES;
    /** More fragments of this message follow. */
    static final int FLAG_MORE = 0x100;
    /** The sender has more to send after this fragment: the receiver lends it credits from its shared pool. */
    static final int FLAG_BACKLOG = 0x200;

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

    /** Where fragments go: a registered staging slot to fill, then a signalled SEND of it. */
    interface FragmentSender {
        /** A free staging slot. */
        int take();

        MemorySegment slot(int slot);

        /** Posts a SEND of the first {@code length} bytes of {@code slot} under {@code wrId}: 0, or an errno. */
        int send(long wrId, int slot, int length);

        /** {@code slot} is free again: its SEND completed, or was never posted. */
        void free(int slot);
    }

    private final FragmentSender out;
    private final SharedCredits shared;
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
    /** When this side last sent data ({@link System#nanoTime()}). */
    private long lastSentNanos = System.nanoTime();

    /** {@code shared}: the credits this side lends its peer, from its transport's shared receive pool. */
    MessageChannel(FragmentSender out, SharedCredits shared, PostedRequests posted, int receiveDepth, int maxMessageSize) {
        this.out = out;
        this.shared = shared;
        this.posted = posted;
        this.receiveDepth = receiveDepth;
        this.message = new MessageAssembly(maxMessageSize);
    }

    /** The peer's side of the handshake: its credit limit and largest message; it starts with the reserved credits. */
    void open(ConnectData.PeerParameters peer) {
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
        out.free(slot);
    }

    /**
     * Gives back the credits held beyond the reserved ones once nothing waits and nothing was sent for
     * {@code idleNanos} before {@code now}: the peer's shared pool then lends them to connections that send. The
     * release uses one of them; returns whether it went out.
     */
    boolean releaseIdleCredits(long now, long idleNanos) {
        if (credits <= ReceivePool.RESERVED_CREDITS || !waiting.isEmpty() || now - lastSentNanos < idleNanos) {
            return false;
        }
        credits--;
        int released = credits - ReceivePool.RESERVED_CREDITS;
        credits = ReceivePool.RESERVED_CREDITS;
        post(ByteBuffer.allocate(Integer.BYTES).putInt(0, released), Integer.BYTES, null, FLAG_RELEASE);
        return true;
    }

    /** Copies one fragment into a staging slot and posts a signalled SEND carrying the owed credits. */
    private void post(ByteBuffer payload, int length, CompletableFuture<Void> f, int flag) {
        int slot = out.take();
        MemorySegment s = out.slot(slot);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 0, owedCredits);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 4, flag);
        peerCredits += owedCredits;
        owedCredits = 0;
        if (length > 0) {
            s.asSlice(HEADER, length).copyFrom(MemorySegment.ofBuffer(payload).asSlice(0, length));
            payload.position(payload.position() + length);
        }
        int rc = out.send(posted.nextId(), slot, HEADER + length);
        if (rc != 0) {
            out.free(slot);
            if (f != null) {
                f.completeExceptionally(new RdmaException("ibv_post_send of a message failed: " + Errno.name(rc)));
            }
            return;
        }
        if (flag != FLAG_CREDIT) {
            lastSentNanos = System.nanoTime();
        }
        posted.add(switch (flag & KIND) {
            case FLAG_CREDIT -> "credit update";
            case FLAG_PROOF -> "proof";
            case FLAG_RELEASE -> "credit release";
            default -> "send";
        }, f, slot);
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
        if (flag == FLAG_RELEASE && byteLength != RELEASE_LENGTH) {
            throw new ProtocolException("peer sent a credit release of " + byteLength + " bytes, expected "
                    + RELEASE_LENGTH + ": not an rdma4j verbs peer, or a corrupted one");
        }
        int kind = flag & KIND;
        boolean known = (flag & ~(KIND | FLAG_MORE | FLAG_BACKLOG)) == 0
                && (kind == FLAG_DATA || kind == FLAG_PROOF && (flag & FLAG_MORE) == 0 || flag == FLAG_CREDIT
                || flag == FLAG_RELEASE);
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
        return accept(fragment, true);
    }

    /**
     * {@link #accept(Fragment)} on a connection that is closing: what came before the close is still put together,
     * but nothing is sent any more, not even credits.
     */
    Received acceptClosing(Fragment fragment) {
        return accept(fragment, false);
    }

    private Received accept(Fragment fragment, boolean sends) {
        int newCredits = creditsAfter(credits, fragment.returnedCredits(), creditLimit);
        if (fragment.bytes() == null) {
            credits = newCredits;
            if (sends) {
                flush();
            }
            return new Received(fragment.returnedCredits(), null, false);
        }
        int newPeerCredits = peerCreditsAfterData(peerCredits, creditLimit);
        credits = newCredits;
        peerCredits = newPeerCredits;
        creditUsed((fragment.flag() & FLAG_BACKLOG) != 0);
        if (fragment.flag() == FLAG_RELEASE) {
            takeRelease(fragment.bytes().getInt(0));
            if (sends) {
                flush();
            }
            return new Received(fragment.returnedCredits(), null, false);
        }
        Received r = message.add(fragment);
        if (sends) {
            flush();
        }
        return r;
    }

    /**
     * The peer gave {@code released} credits back unused: lent ones return to the pool. An honest peer releases only
     * lent ones (it keeps the reserved ones); any others are owed to it again.
     */
    private void takeRelease(int released) {
        if (released < 0 || released > peerCredits) {
            throw new ProtocolException("peer released " + released + " credits while it holds " + peerCredits
                    + ": not an rdma4j verbs peer, or a corrupted one");
        }
        peerCredits -= released;
        int lentBack = Math.min(released, lentCredits);
        lentCredits -= lentBack;
        shared.giveBack(lentBack);
        owedCredits += released - lentBack;
    }

    /**
     * The peer used a credit: a lent one goes back to the pool, a reserved one back to the peer; a peer with more to
     * send is lent more, up to the credit limit. A peer with nothing more waiting needs no loan: what this side lent
     * and has not sent it yet goes back to the pool at once, and what it holds comes back with its release.
     */
    private void creditUsed(boolean backlog) {
        if (lentCredits > 0) {
            lentCredits--;
            shared.giveBack(1);
        } else {
            owedCredits++;
        }
        if (backlog) {
            int allocated = peerCredits + owedCredits;
            int lent = shared.lend(creditLimit - allocated);
            lentCredits += lent;
            owedCredits += lent;
        } else {
            int unsent = Math.min(owedCredits, lentCredits);
            owedCredits -= unsent;
            lentCredits -= unsent;
            shared.giveBack(unsent);
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
