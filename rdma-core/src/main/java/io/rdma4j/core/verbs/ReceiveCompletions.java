package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Completions;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.VerbsOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * The completion queue every connection's receives complete on, one per transport beside its shared receive queue
 * ({@link ReceivePool}): the progress thread polls one queue for every peer's messages, however many peers there
 * are. It has an entry for every receive the shared queue can hold, and a slot completes again only once it is
 * posted again, so it cannot overflow whatever peers send. A completion's queue pair number says whose it is; the
 * receive of a connection that is gone only gives its slot back.
 *
 * <p>Whoever holds the poll lock dispatches each completion to its connection, in the order they completed: the
 * progress thread, or a caller waiting for a reply. A destroyed queue pair's number may be given to a new one, so
 * {@link #retire} destroys a queue pair and takes its last completions off this queue under the poll lock, and
 * {@link #register} creates queue pairs under it: no completion of a destroyed queue pair reaches a new one.
 */
final class ReceiveCompletions implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(ReceiveCompletions.class.getName());

    private final MemorySegment cq;
    private final Arena arena = Arena.ofShared();
    private final Completions completions;
    private final ReceivePool receives;
    private final ReentrantLock pollLock = new ReentrantLock();
    /** Connections by the number of their queue pair, while it exists; read by the device's event thread too. */
    private final Map<Integer, VerbsConnection> byQueuePair = new ConcurrentHashMap<>();

    private ReceiveCompletions(MemorySegment cq, ReceivePool receives) {
        this.cq = cq;
        this.receives = receives;
        this.completions = new Completions(VerbsOps.ofCompletionQueue(cq), arena, QueuePairResources.POLL_BATCH);
    }

    /** The CQ for {@code receives}' shared receive queue, on {@code device}'s completion channel. */
    static ReceiveCompletions create(VerbsDevice device, ReceivePool receives) {
        return new ReceiveCompletions(Verbs.createCompletionQueue(device.context, receives.capacity(),
                device.completionChannel), receives);
    }

    MemorySegment cq() {
        return cq;
    }

    /**
     * Creates a queue pair that completes receives here ({@code create}) and registers {@code c} under its number,
     * holding the poll lock, so that nothing a destroyed queue pair of the same number left here reaches it.
     */
    QueuePairResources register(VerbsConnection c, Supplier<QueuePairResources> create) {
        pollLock.lock();
        try {
            QueuePairResources r = create.get();
            byQueuePair.put(r.queuePairNumber, c);
            return r;
        } finally {
            pollLock.unlock();
        }
    }

    /**
     * Destroys a queue pair ({@code destroy}), dispatches every completion this queue still holds (its last ones
     * among them, whose slots are given back), then forgets its number.
     */
    void retire(int queuePairNumber, Runnable destroy) {
        pollLock.lock();
        try {
            destroy.run();
            // what the queue pair left is here now: a poll that comes back short has taken it all
            while (reap() == QueuePairResources.POLL_BATCH) {
                // dispatch on
            }
        } finally {
            byQueuePair.remove(queuePairNumber);
            pollLock.unlock();
        }
    }

    /** The connection whose queue pair has number {@code queuePairNumber}, or null. */
    VerbsConnection connection(int queuePairNumber) {
        return byQueuePair.get(queuePairNumber);
    }

    /**
     * Polls once and dispatches what completed, unless someone else is polling (who then dispatches), or this thread
     * is dispatching already; returns the completions found.
     */
    int tryPoll() {
        // a thread inside a dispatch (a caller's code run on a completion) must not poll again: the entries being
        // dispatched would be overwritten
        if (pollLock.isHeldByCurrentThread() || !pollLock.tryLock()) {
            return 0;
        }
        try {
            return reap();
        } finally {
            pollLock.unlock();
        }
    }

    /** The progress thread, before sleeping: the next receive raises an event. */
    void arm() {
        pollLock.lock();
        try {
            completions.requestNotify();
        } finally {
            pollLock.unlock();
        }
    }

    /** Under the poll lock: one poll, each completion handed to its connection. */
    private int reap() {
        int n = completions.poll();
        if (n < 0) {
            LOG.log(System.Logger.Level.ERROR, "ibv_poll_cq of the shared receive completion queue failed (" + n + ")");
            return 0;
        }
        for (int i = 0; i < n; i++) {
            long wrId = completions.wrId(i);
            VerbsConnection c = byQueuePair.get(completions.qpNum(i));
            if (c == null) {
                receives.repost(wrId); // its connection is gone; the slot serves the others
                continue;
            }
            try {
                c.onReceive(wrId, completions.status(i), completions.byteLength(i));
            } catch (RuntimeException e) {
                c.failed(e); // only that connection closes
            }
        }
        return n;
    }

    /** Once every queue pair that completed here is destroyed. */
    @Override
    public void close() {
        int rc = Verbs.destroyCompletionQueue(cq);
        if (rc != 0) {
            LOG.log(System.Logger.Level.WARNING, "ibv_destroy_cq of the shared receive completion queue failed: " + rc);
        }
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
