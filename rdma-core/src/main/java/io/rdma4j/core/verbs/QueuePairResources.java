package io.rdma4j.core.verbs;

import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.nativeloader.Completions;
import io.rdma4j.nativeloader.RdmaCm;
import io.rdma4j.nativeloader.ReceiveQueue;
import io.rdma4j.nativeloader.SendQueue;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.VerbsOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * What one connection owns natively, as pyverbs' objects own theirs: its CQ (on the transport's completion
 * channel), its RC queue pair, the registered receive and send slots, and the work requests and completion
 * array over them. {@link #close} releases them in the order the NIC needs: the queue pair first (no more
 * DMA), then the CQ it completed on, then the registrations, then the memory.
 */
final class QueuePairResources implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(QueuePairResources.class.getName());
    /** Completions reaped per ibv_poll_cq. */
    static final int POLL_BATCH = 32;

    private final MemorySegment id;
    private final Arena arena = Arena.ofShared();
    private MemorySegment cq;
    private boolean qpCreated;
    private Verbs.MemoryRegion receiveRegion;
    private Verbs.MemoryRegion sendRegion;
    private TransportMetrics metrics;
    private long registeredBytes;

    final int slotSize;
    final int receiveSlots;
    final int sendSlots;
    MemorySegment receiveBuffer;
    MemorySegment sendBuffer;
    Completions completions;
    SendQueue sendQueue;
    ReceiveQueue receiveQueue;

    private QueuePairResources(MemorySegment id, int receiveSlots, int sendSlots, int slotSize) {
        this.id = id;
        this.receiveSlots = receiveSlots;
        this.sendSlots = sendSlots;
        this.slotSize = slotSize;
    }

    /**
     * Creates the CQ and queue pair on cm id {@code id}, and the receive and send slots of {@code slotSize}
     * bytes; receive work request ids carry {@code receiveTag}. Nothing is left behind when it fails.
     */
    static QueuePairResources create(VerbsDevice device, TransportMetrics metrics, MemorySegment id, int receiveSlots,
                                     int sendSlots, int maxSendWr, int slotSize, long receiveTag) {
        QueuePairResources r = new QueuePairResources(id, receiveSlots, sendSlots, slotSize);
        try {
            r.cq = Verbs.createCompletionQueue(device.context, maxSendWr + receiveSlots, device.completionChannel);
            r.completions = new Completions(VerbsOps.ofCompletionQueue(r.cq), r.arena, POLL_BATCH);
            MemorySegment qp = RdmaCm.createQueuePair(id, device.pd, r.cq, maxSendWr, receiveSlots);
            r.qpCreated = true;
            VerbsOps.QueuePairOps qpOps = VerbsOps.ofQueuePair(qp);
            r.receiveBuffer = r.arena.allocate((long) receiveSlots * slotSize, 4096);
            r.sendBuffer = r.arena.allocate((long) sendSlots * slotSize, 4096);
            r.receiveRegion = VerbsTransport.registerOrExplain(device.pd, r.receiveBuffer, VerbsAccess.IBV_ACCESS_LOCAL_WRITE);
            r.sendRegion = VerbsTransport.registerOrExplain(device.pd, r.sendBuffer, 0);
            r.registeredBytes = r.receiveBuffer.byteSize() + r.sendBuffer.byteSize();
            r.metrics = metrics;
            metrics.messageBuffersRegistered(r.registeredBytes);
            r.sendQueue = new SendQueue(qpOps, r.arena);
            r.receiveQueue = new ReceiveQueue(qpOps, r.arena, r.receiveBuffer, receiveSlots, slotSize,
                    r.receiveRegion.lkey(), receiveTag);
            return r;
        } catch (RuntimeException e) {
            r.close();
            throw e;
        }
    }

    int sendLkey() {
        return sendRegion.lkey();
    }

    /** Receive slot {@code slot}'s bytes. */
    MemorySegment receiveSlot(int slot) {
        return receiveBuffer.asSlice((long) slot * slotSize, slotSize);
    }

    /** Send staging slot {@code slot}'s bytes. */
    MemorySegment sendSlot(int slot) {
        return sendBuffer.asSlice((long) slot * slotSize, slotSize);
    }

    /** Only once nothing polls the CQ or posts to the queue pair any more. */
    @Override
    public void close() {
        if (qpCreated) {
            RdmaCm.destroyQueuePair(id);
            qpCreated = false;
        }
        if (cq != null) {
            int rc = Verbs.destroyCompletionQueue(cq);
            if (rc != 0) {
                LOG.log(System.Logger.Level.WARNING, "ibv_destroy_cq failed: " + rc);
            }
            cq = null;
        }
        if (metrics != null) {
            metrics.messageBuffersDeregistered(registeredBytes);
            metrics = null;
        }
        if (receiveRegion != null) {
            Verbs.deregisterMemory(receiveRegion);
            receiveRegion = null;
        }
        if (sendRegion != null) {
            Verbs.deregisterMemory(sendRegion);
            sendRegion = null;
        }
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
