package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Completions;
import io.rdma4j.nativeloader.RdmaCm;
import io.rdma4j.nativeloader.SendQueue;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.VerbsOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.LongConsumer;

/**
 * What one connection owns natively, as pyverbs' objects own theirs: its CQ (on the transport's completion
 * channel), its RC queue pair on the transport's shared receive queue, and the work requests and completion array.
 * Its message buffers are the transport's ({@link ReceivePool}, {@link StagingPool}): an idle connection holds none.
 * The CQ stays the connection's own: it is the device's ring of completions (tens of bytes an entry, not registered
 * message memory), a caller waiting on an operation polls its own connection's CQ without taking others'
 * completions, and a CQ shared by all connections would have to hold every connection's completions in flight or
 * overflow, which loses completions.
 * {@link #close} releases them in the order the NIC needs: the queue pair first (no more DMA), then the CQ it
 * completed on, handing the receive slots its last completions name back to the shared receive queue.
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
     * its CQ and queue pair on the shared receive queue, its place among the device's event listeners. Nothing is
     * left behind when it fails.
     */
    static QueuePairResources create(VerbsTransport transport, MemorySegment id, VerbsConnection c) {
        int depth = transport.options.receiveDepth();
        // in flight: fragments up to the credits, credit-only messages, a proof
        int messagesInFlight = depth + ReceivePool.CONTROL_SLOTS + 2;
        int maxSendWr = transport.config.maxOutstandingOperations() + messagesInFlight + 8;
        transport.receives.join();
        QueuePairResources r;
        try {
            r = create(transport.device, id, transport.receives.srq(), maxSendWr, messagesInFlight);
        } catch (RuntimeException e) {
            transport.receives.leave(0);
            throw e;
        }
        transport.deviceEvents.register(r.queuePairNumber, c);
        return r;
    }

    /**
     * Destroys the queue pair and CQ, reposting the shared receive slots that its last completions name, and gives
     * the reservation and the {@code lentCredits} back to the transport's receive pool.
     */
    void release(VerbsTransport transport, int lentCredits) {
        transport.deviceEvents.unregister(queuePairNumber);
        close(transport.receives);
        transport.receives.leave(lentCredits);
    }

    /**
     * Creates the CQ, large enough for {@code maxSendWr} sends and {@code maxReceives} receives in flight, and the
     * queue pair on cm id {@code id}, taking its receives from {@code srq}. Nothing is left behind when it fails.
     */
    private static QueuePairResources create(VerbsDevice device, MemorySegment id, MemorySegment srq, int maxSendWr,
                                             int maxReceives) {
        QueuePairResources r = new QueuePairResources(id);
        try {
            r.cq = Verbs.createCompletionQueue(device.context, maxSendWr + maxReceives, device.completionChannel);
            r.completions = new Completions(VerbsOps.ofCompletionQueue(r.cq), r.arena, POLL_BATCH);
            MemorySegment qp = RdmaCm.createQueuePair(id, device.pd, r.cq, maxSendWr, srq);
            r.qp = qp;
            r.qpCreated = true;
            r.queuePairNumber = Verbs.queuePairNumber(qp);
            r.sendQueue = new SendQueue(VerbsOps.ofQueuePair(qp), r.arena);
            return r;
        } catch (RuntimeException e) {
            r.close(wrId -> { });
            throw e;
        }
    }

    /** Whether the device has put the queue pair in the error state; false once it is destroyed. */
    boolean queuePairInError() {
        return qpCreated && Verbs.queuePairInError(qp);
    }

    /**
     * Only once nothing polls the CQ or posts to the queue pair any more. Completions still on the CQ are polled
     * once the queue pair is gone, and the receive slots they name posted again to {@code receives}: else they would
     * be lost to every connection.
     */
    void close(ReceivePool receives) {
        close(wrId -> {
            if (ReceivePool.isReceive(wrId)) {
                receives.repost(wrId);
            }
        });
    }

    private void close(LongConsumer leftOver) {
        if (qpCreated) {
            RdmaCm.destroyQueuePair(id);
            qpCreated = false;
        }
        if (cq != null) {
            if (completions != null) {
                int n;
                while ((n = completions.poll()) > 0) {
                    for (int i = 0; i < n; i++) {
                        leftOver.accept(completions.wrId(i));
                    }
                }
            }
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

    @Override
    public void close() {
        close(wrId -> { });
    }
}
