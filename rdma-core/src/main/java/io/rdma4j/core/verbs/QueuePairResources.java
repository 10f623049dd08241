package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Completions;
import io.rdma4j.nativeloader.RdmaCm;
import io.rdma4j.nativeloader.SendQueue;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.VerbsOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.IntSupplier;

/**
 * What one connection owns natively, as pyverbs' objects own theirs: its RC queue pair on the transport's shared
 * receive queue, the CQ its sends complete on, and the work requests and completion array. Its receives complete on
 * the transport's shared receive CQ ({@link ReceiveCompletions}), and its message buffers are the transport's
 * ({@link ReceivePool}, {@link StagingPool}): an idle connection holds none. The send CQ stays the connection's own:
 * a caller waiting for its READ polls it without taking other connections' completions, and it is sized exactly
 * for this queue pair's sends, which a shared one could only be for every connection's at once.
 * {@link #release} releases them in the order the NIC needs: the queue pair first (no more DMA, its last receives
 * taken off the shared CQ), then its send CQ.
 */
final class QueuePairResources implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(QueuePairResources.class.getName());
    /** Completions reaped per ibv_poll_cq. */
    static final int POLL_BATCH = 32;

    private final MemorySegment id;
    private final Arena arena = Arena.ofShared();
    private MemorySegment cq;
    private boolean qpCreated;
    private MemorySegment qp;

    Completions completions;
    SendQueue sendQueue;
    /** The queue pair's number, as completions and asynchronous events name it. */
    int queuePairNumber;

    private QueuePairResources(MemorySegment id) {
        this.id = id;
    }

    /**
     * What connection {@code c} on cm id {@code id} holds of {@code transport}: its reservation in the receive pool,
     * its send CQ and queue pair on the shared receive queue, registered with the shared receive CQ under its
     * number. Nothing is left behind when it fails.
     */
    static QueuePairResources create(VerbsTransport transport, MemorySegment id, VerbsConnection c) {
        int depth = transport.options.receiveDepth();
        // in flight: fragments up to the credits, credit-only messages, a proof or a release
        int messagesInFlight = depth + ReceivePool.CONTROL_SLOTS + 2;
        int maxSendWr = transport.config.maxOutstandingOperations() + messagesInFlight + 8;
        transport.receives.join();
        try {
            return transport.receiveCompletions.register(c, () -> create(transport.device, id, transport.receives.srq(),
                    transport.receiveCompletions.cq(), maxSendWr));
        } catch (RuntimeException e) {
            transport.receives.leave(0);
            throw e;
        }
    }

    /**
     * Destroys the queue pair (its last receives dispatched from the shared receive CQ) and its send CQ, and gives
     * the reservation and the {@code lentCredits} back to the transport's receive pool.
     */
    void release(VerbsTransport transport, IntSupplier lentCredits) {
        transport.receiveCompletions.retire(queuePairNumber, this::destroyQueuePair);
        close();
        transport.receives.leave(lentCredits.getAsInt());
    }

    /**
     * Creates the send CQ, large enough for {@code maxSendWr} sends in flight, and the queue pair on cm id {@code id},
     * taking its receives from {@code srq} and completing them on {@code receiveCq}. Nothing is left behind when it
     * fails.
     */
    private static QueuePairResources create(VerbsDevice device, MemorySegment id, MemorySegment srq,
                                             MemorySegment receiveCq, int maxSendWr) {
        QueuePairResources r = new QueuePairResources(id);
        try {
            r.cq = Verbs.createCompletionQueue(device.context, maxSendWr, device.completionChannel);
            r.completions = new Completions(VerbsOps.ofCompletionQueue(r.cq), r.arena, POLL_BATCH);
            MemorySegment qp = RdmaCm.createQueuePair(id, device.pd, r.cq, receiveCq, maxSendWr, srq);
            r.qp = qp;
            r.qpCreated = true;
            r.queuePairNumber = Verbs.queuePairNumber(qp);
            r.sendQueue = new SendQueue(VerbsOps.ofQueuePair(qp), r.arena);
            return r;
        } catch (RuntimeException e) {
            r.close();
            throw e;
        }
    }

    /** Whether the device has put the queue pair in the error state; false once it is destroyed. */
    boolean queuePairInError() {
        return qpCreated && Verbs.queuePairInError(qp);
    }

    private void destroyQueuePair() {
        if (qpCreated) {
            RdmaCm.destroyQueuePair(id);
            qpCreated = false;
        }
    }

    /**
     * Only once nothing polls the send CQ or posts to the queue pair any more, and the queue pair is destroyed or
     * completes no receive (it was never connected): destroys what is left.
     */
    @Override
    public void close() {
        destroyQueuePair();
        if (cq != null) {
            int rc = Verbs.destroyCompletionQueue(cq);
            if (rc != 0) {
                LOG.log(System.Logger.Level.WARNING, "ibv_destroy_cq failed: " + rc);
            }
            cq = null;
        }
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
