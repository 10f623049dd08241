package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
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

    /** Connect private data: magic+version, max message size, receive depth (data credits). */
    static final int MAGIC_V1 = 0x52344A01; // "R4J" v1
    static final int PRIVATE_DATA_LENGTH = 12;
    /** Each slot starts with the credits returned and the flag. */
    static final int HEADER = 8;
    /** Receive slots beyond the data credits, for credit-only messages (at most 2 are ever in flight). */
    static final int EXTRA_SLOTS = 4;
    private static final int FLAG_DATA = 0;
    private static final int FLAG_CREDIT = 1;

    /** What the peer announced when connecting. */
    record PeerParameters(int maxMessageSize, int receiveDepth) {
    }

    /** A message received in a slot: the credits it returned and its payload (null for a credit-only one). */
    record Received(int returnedCredits, ByteBuffer payload) {
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
    static RdmaCm.ConnectionParameters connectionParameters(int maxMessageSize, int receiveDepth, int responderResources,
                                                          int initiatorDepth) {
        return new RdmaCm.ConnectionParameters(privateData(maxMessageSize, receiveDepth), responderResources,
                initiatorDepth, 7, 7);
    }

    /** This side's private data: magic, max message size, receive depth. */
    static byte[] privateData(int maxMessageSize, int receiveDepth) {
        return ByteBuffer.allocate(PRIVATE_DATA_LENGTH).order(ByteOrder.BIG_ENDIAN)
                .putInt(MAGIC_V1).putInt(maxMessageSize).putInt(receiveDepth).array();
    }

    /** Reads the peer's private data. */
    static PeerParameters peer(byte[] privateData) {
        if (privateData.length < PRIVATE_DATA_LENGTH) {
            throw new ProtocolException("peer sent " + privateData.length + " bytes of connection data, expected "
                    + PRIVATE_DATA_LENGTH + " (not an rdma4j verbs peer?)");
        }
        ByteBuffer b = ByteBuffer.wrap(privateData).order(ByteOrder.BIG_ENDIAN);
        int magic = b.getInt();
        if (magic != MAGIC_V1) {
            throw new ProtocolException("peer speaks protocol 0x" + Integer.toHexString(magic) + ", this side 0x"
                    + Integer.toHexString(MAGIC_V1) + ": use the same rdma4j version on both sides");
        }
        return new PeerParameters(b.getInt(), b.getInt());
    }

    /** Posts every receive slot: before the connection can be established. */
    void postReceives() {
        for (int i = 0; i < resources.receiveSlots; i++) {
            postReceive(i);
        }
    }

    /** The peer's side of the handshake: its credits and largest message. */
    void open(PeerParameters peer) {
        credits = Math.min(peer.receiveDepth(), receiveDepth);
        peerMaxMessageSize = peer.maxMessageSize();
    }

    private void postReceive(int slot) {
        int rc = resources.receiveQueue.post(slot);
        if (rc != 0) {
            throw new RdmaException("ibv_post_recv failed: errno " + rc);
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
        owedCredits = 0;
        if (length > 0) {
            s.asSlice(HEADER, length).copyFrom(MemorySegment.ofBuffer(payload));
        }
        int rc = resources.sendQueue.postSend(posted.nextId(), s.address(), HEADER + length, resources.sendLkey());
        if (rc != 0) {
            freeSendSlots.add(slot);
            if (f != null) {
                f.completeExceptionally(new RdmaException("ibv_post_send of a message failed: errno " + rc));
            }
            return;
        }
        posted.add(flag == FLAG_DATA ? "send" : "credit update", f, slot);
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

    /** Without the lock: what receive slot {@code slot} holds after a receive of {@code byteLength} bytes. */
    Received read(int slot, int byteLength) {
        MemorySegment s = resources.receiveSlot(slot);
        int returned = s.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
        int flag = s.get(ValueLayout.JAVA_INT_UNALIGNED, 4);
        if (flag != FLAG_DATA) {
            return new Received(returned, null);
        }
        int length = byteLength - HEADER;
        if (length < 0 || length > resources.slotSize - HEADER) {
            throw new ProtocolException("peer sent a message of " + byteLength + " bytes into a slot of "
                    + resources.slotSize + ": not an rdma4j verbs peer, or a corrupted one");
        }
        ByteBuffer message = ByteBuffer.allocate(length);
        MemorySegment.ofBuffer(message).copyFrom(s.asSlice(HEADER, length));
        return new Received(returned, message);
    }

    /** Reposts the slot of {@code received}, takes its credits and sends what they allow. */
    void accept(int slot, Received received) {
        postReceive(slot);
        credits += received.returnedCredits();
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
