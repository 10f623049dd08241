package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.nativeloader.Errno;
import io.rdma4j.nativeloader.NativeCallException;
import io.rdma4j.nativeloader.SharedReceiveQueue;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.VerbsOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * The receive side of every connection of a transport: one shared receive queue (SRQ) of message-fragment slots,
 * and the accounting that keeps a posted slot behind every credit any peer holds, so that receive memory grows with
 * the connections' reservations, not with their receive depth.
 *
 * <p>Flow control with shared receives: a connection reserves {@link #RESERVED_CREDITS} data slots, which its peer
 * holds as credits from the start, and {@link #CONTROL_SLOTS} for the credit-only messages that are not counted
 * against credits: a credit-only message returns at least half the credits its sender granted (and two or more), so
 * no more than two are in flight, three while a loan changes how many were granted. A pool of
 * {@link #SHARED_CREDITS} more data slots is lent to connections whose peer says it has more to send (the backlog
 * flag of its fragments), up to {@code verbs.receive-depth} each ({@link SharedCredits}), and comes back as those
 * credits are used, or when a peer that stopped sending gives back what it holds beyond its reservation (a release
 * message, which itself uses a credit): an idle connection keeps no share of the pool. The slots
 * posted are thus never fewer than the credits granted: a SEND always finds a receive, so there is no RNR wait (and
 * iWARP, which has no RNR retry, never fails a queue pair for it), and the SRQ limit event would only report what
 * this accounting already knows. Slots are posted as connections join and reused by those that join after others
 * left: the SRQ keeps the size of the most connections it served at once.
 *
 * <p>What sharing costs: a peer that sends beyond its credits is closed at its first fragment without one, but
 * what it had in flight by then takes slots other connections' credits stand for, with the unlent part of the shared
 * pool as the margin. Past it, an honest SEND waits for a receive (RNR retry, unlimited) on RoCE and InfiniBand, and
 * fails its connection on iWARP; the listener's authentication keeps such peers out.
 *
 * <p>Every slot a completion names, successful or not, is reposted by whoever handles that completion, once its
 * bytes are copied out ({@link #repost}); that is thread-safe ({@link SharedReceiveQueue#post}).
 */
final class ReceivePool implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(ReceivePool.class.getName());
    /** Work request ids of receives carry this bit; the chunk and slot are in the low bits. */
    static final long RECV_TAG = 1L << 62;
    private static final int CHUNK_SHIFT = 20;
    /** Data credits every connection's peer holds, and the slots reserved for them. */
    static final int RESERVED_CREDITS = 2;
    /** Slots per connection for the credit-only messages in flight (see the class comment). */
    static final int CONTROL_SLOTS = 3;
    /** Data credits lent to busy connections, over all connections of the transport. */
    static final int SHARED_CREDITS = 128;
    /** The largest SRQ asked for: 16,384 receives serve about 3,200 connections. */
    static final int MAX_DEPTH = 16_384;

    private final MemorySegment srq;
    private final VerbsOps.SharedReceiveQueueOps ops;
    private final SlotChunks chunks;
    private final Arena arena = Arena.ofShared();
    private final int capacity;
    private final String device;
    private volatile SharedReceiveQueue[] queues = new SharedReceiveQueue[0];
    private final SharedCredits shared = new SharedCredits(SHARED_CREDITS);
    // guarded by this
    private int connections;

    private ReceivePool(MemorySegment srq, int capacity, SlotChunks chunks, String device) {
        this.srq = srq;
        this.ops = VerbsOps.ofSharedReceiveQueue(srq);
        this.capacity = capacity;
        this.chunks = chunks;
        this.device = device;
    }

    /**
     * The transport's SRQ with slots of {@code slotSize} bytes, none posted yet.
     *
     * @throws ProviderUnavailableException when the device has no SRQ or refuses one
     */
    static ReceivePool create(MemorySegment context, MemorySegment pd, String device, int slotSize, TransportMetrics metrics) {
        int deviceMax;
        MemorySegment srq;
        try {
            // every receive the queue holds may sit completed in the shared receive CQ at once: no more than it holds
            deviceMax = Math.min(Verbs.maxSharedReceiveQueueDepth(context), Verbs.maxCompletionQueueDepth(context));
            if (deviceMax < SlotChunks.CHUNK_SLOTS) {
                throw new ProviderUnavailableException(device + " offers no shared receive queue, or no completion queue"
                        + " to match it (max_srq_wr and max_cqe allow " + deviceMax + "), which rdma4j's verbs messages"
                        + " need: use the tcp provider (provider=tcp) on this host");
            }
            srq = Verbs.createSharedReceiveQueue(pd, Math.min(deviceMax, MAX_DEPTH), 0);
        } catch (NativeCallException e) {
            throw new ProviderUnavailableException(device + " refused a shared receive queue, which rdma4j's verbs messages"
                    + " need (" + e.getMessage() + "): use the tcp provider (provider=tcp) on this host", e);
        }
        int capacity = Math.min(deviceMax, MAX_DEPTH) / SlotChunks.CHUNK_SLOTS * SlotChunks.CHUNK_SLOTS;
        return new ReceivePool(srq, capacity, new SlotChunks(pd, VerbsAccess.IBV_ACCESS_LOCAL_WRITE, slotSize, metrics),
                device);
    }

    MemorySegment srq() {
        return srq;
    }

    /** The most receives the shared receive queue holds. */
    int capacity() {
        return capacity;
    }

    int slotSize() {
        return chunks.slotSize();
    }

    /** Slots a number of connections needs posted: their reservations and the shared pool. */
    static int slotsFor(int connections) {
        return connections * (RESERVED_CREDITS + CONTROL_SLOTS) + SHARED_CREDITS;
    }

    /**
     * A connection joins: its reserved slots are posted (registering more when the SRQ has served fewer connections).
     *
     * @throws RdmaException when the SRQ holds no more connections
     */
    synchronized void join() {
        int needed = slotsFor(connections + 1);
        if (needed > capacity) {
            throw new RdmaException("this verbs transport holds " + connections + " connections, the most the shared"
                    + " receive queue of " + device + " serves (" + capacity + " receives): close idle connections or"
                    + " open another transport");
        }
        while (chunks.slots() < needed) {
            postChunk();
        }
        connections++;
    }

    /** A connection left, giving back the {@code lentHeld} credits it had been lent. */
    synchronized void leave(int lentHeld) {
        connections--;
        shared.giveBack(lentHeld);
    }

    /** The credits lent from the slots posted beyond the connections' reservations. */
    SharedCredits shared() {
        return shared;
    }

    private void postChunk() {
        int chunk = queues.length;
        int first = chunks.slots();
        SlotChunks.Chunk c = chunks.grow();
        SharedReceiveQueue q = new SharedReceiveQueue(ops, arena, c.memory(), SlotChunks.CHUNK_SLOTS, chunks.slotSize(),
                c.region().lkey(), RECV_TAG | ((long) chunk << CHUNK_SHIFT));
        SharedReceiveQueue[] grown = Arrays.copyOf(queues, chunk + 1);
        grown[chunk] = q;
        queues = grown;
        for (int i = 0; i < SlotChunks.CHUNK_SLOTS; i++) {
            check(q.post(i), first + i);
        }
    }

    /**
     * What a receive completion brought: the fragment copied out of its slot, or why the connection ends ({@link
     * ProtocolException} for a peer that broke the protocol); neither for a flush that needs nothing.
     */
    record Arrival(MessageChannel.Fragment fragment, RdmaException failure) {
    }

    /**
     * Takes what the receive completion {@code wrId} brought (with {@code status} and {@code byteLength}), then posts
     * its slot again, whatever it held: it serves every connection.
     */
    Arrival take(long wrId, int status, int byteLength, boolean iwarp, String peer) {
        try {
            if (status == WorkCompletions.SUCCESS) {
                return new Arrival(MessageChannel.read(slot(wrId), byteLength), null);
            }
            return new Arrival(null, WorkCompletions.receiveFailure(status, iwarp, slotSize(), peer));
        } catch (ProtocolException e) {
            return new Arrival(null, e);
        } finally {
            repost(wrId);
        }
    }


    /** The bytes of the slot a receive completion with id {@code wrId} names. */
    MemorySegment slot(long wrId) {
        return chunks.slot(slotOf(wrId));
    }

    /** Posts the slot of {@code wrId} again: its bytes have been copied out, or it completed with an error. */
    void repost(long wrId) {
        int chunk = (int) ((wrId & ~RECV_TAG) >>> CHUNK_SHIFT);
        int index = (int) (wrId & ((1L << CHUNK_SHIFT) - 1));
        check(queues[chunk].post(index), slotOf(wrId));
    }

    private static int slotOf(long wrId) {
        int chunk = (int) ((wrId & ~RECV_TAG) >>> CHUNK_SHIFT);
        return chunk * SlotChunks.CHUNK_SLOTS + (int) (wrId & ((1L << CHUNK_SHIFT) - 1));
    }

    private static void check(int rc, int slot) {
        if (rc != 0) {
            throw new RdmaException("ibv_post_srq_recv of receive slot " + slot + " failed: " + Errno.name(rc));
        }
    }

    /** Only once every queue pair on the SRQ is destroyed; the slots stay allocated if the SRQ cannot go. */
    @Override
    public void close() {
        int rc = Verbs.destroySharedReceiveQueue(srq);
        if (rc != 0) {
            LOG.log(System.Logger.Level.ERROR, "ibv_destroy_srq failed (" + Errno.name(rc) + "): its receive slots stay"
                    + " registered, since the device may still write to them");
            return;
        }
        chunks.close();
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
