package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.RdmaBindings;
import io.rdma4j.nativeloader.bindings.ibv_send_wr;
import io.rdma4j.nativeloader.bindings.ibv_sge;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The send side of one queue pair: work requests and SGEs in native memory owned by the caller's arena,
 * posted with {@code ibv_post_send}. Every work request carries one SGE. Methods return what
 * {@code ibv_post_send} returns: 0, or an errno value. Not thread-safe: the caller serialises posts.
 *
 * <p>A single RDMA READ or WRITE ({@link #postRead}, {@link #postWrite}) goes through a work request built
 * once, of which only the 7 fields that change are written, as perftest does: this is the latency path.
 * A chain of up to {@link #MAX_CHAIN} one-sided requests is prepared with {@link #prepareChained} and
 * posted with one call; only its last request is signalled, since an RC queue pair completes in order.
 */
public final class SendQueue {

    /** Longest chain {@link #prepareChained} builds. */
    public static final int MAX_CHAIN = 64;
    public static final int RDMA_READ = RdmaBindings.IBV_WR_RDMA_READ();
    public static final int RDMA_WRITE = RdmaBindings.IBV_WR_RDMA_WRITE();
    private static final int SEND = RdmaBindings.IBV_WR_SEND();
    private static final int SIGNALED = RdmaBindings.IBV_SEND_SIGNALED();

    private final VerbsOps.QueuePairOps ops;
    private final MemorySegment chainWrs;
    private final MemorySegment chainSges;
    private final MemorySegment singleWr;
    private final MemorySegment singleSge;
    private final MemorySegment singleRdma;
    private final MemorySegment messageWr;
    private final MemorySegment messageSge;
    private final MemorySegment badWr;

    /** The send queue of {@code ops}' queue pair; its native memory lives as long as {@code arena}. */
    public SendQueue(VerbsOps.QueuePairOps ops, Arena arena) {
        this.ops = ops;
        chainWrs = ibv_send_wr.allocateArray(MAX_CHAIN, arena);
        chainSges = ibv_sge.allocateArray(MAX_CHAIN, arena);
        singleWr = ibv_send_wr.allocate(arena);
        singleSge = ibv_sge.allocate(arena);
        singleRdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(singleWr));
        ibv_send_wr.next(singleWr, MemorySegment.NULL);
        ibv_send_wr.sg_list(singleWr, singleSge);
        ibv_send_wr.num_sge(singleWr, 1);
        ibv_send_wr.send_flags(singleWr, SIGNALED);
        messageWr = ibv_send_wr.allocate(arena);
        messageSge = ibv_sge.allocate(arena);
        ibv_send_wr.next(messageWr, MemorySegment.NULL);
        ibv_send_wr.sg_list(messageWr, messageSge);
        ibv_send_wr.num_sge(messageWr, 1);
        ibv_send_wr.opcode(messageWr, SEND);
        ibv_send_wr.send_flags(messageWr, SIGNALED);
        badWr = arena.allocate(ValueLayout.ADDRESS);
    }

    /** One signalled RDMA READ of {@code length} bytes at {@code remoteAddress} into {@code localAddress}. */
    public int postRead(long wrId, long localAddress, int length, int lkey, long remoteAddress, int rkey) {
        return postSingle(RDMA_READ, wrId, localAddress, length, lkey, remoteAddress, rkey);
    }

    /** One signalled RDMA WRITE of {@code length} bytes at {@code localAddress} to {@code remoteAddress}. */
    public int postWrite(long wrId, long localAddress, int length, int lkey, long remoteAddress, int rkey) {
        return postSingle(RDMA_WRITE, wrId, localAddress, length, lkey, remoteAddress, rkey);
    }

    private int postSingle(int opcode, long wrId, long localAddress, int length, int lkey, long remoteAddress, int rkey) {
        ibv_send_wr.wr_id(singleWr, wrId);
        ibv_send_wr.opcode(singleWr, opcode);
        ibv_sge.addr(singleSge, localAddress);
        ibv_sge.length(singleSge, length);
        ibv_sge.lkey(singleSge, lkey);
        ibv_send_wr.wr.rdma.remote_addr(singleRdma, remoteAddress);
        ibv_send_wr.wr.rdma.rkey(singleRdma, rkey);
        return ops.postSend(singleWr, badWr);
    }

    /**
     * Writes request {@code index} of a chain of {@code length} ({@link #RDMA_READ} or {@link #RDMA_WRITE});
     * only the last is signalled. Post the chain with {@link #postChain} once every index is written.
     */
    public void prepareChained(int index, int length, int opcode, long wrId, long localAddress, int byteLength, int lkey,
                               long remoteAddress, int rkey) {
        if (index < 0 || index >= length || length > MAX_CHAIN) {
            throw new IndexOutOfBoundsException("request " + index + " of a chain of " + length + " (at most " + MAX_CHAIN + ")");
        }
        if (opcode != RDMA_READ && opcode != RDMA_WRITE) {
            throw new IllegalArgumentException("a chain holds RDMA READs and WRITEs, not opcode " + opcode);
        }
        MemorySegment sge = ibv_sge.asSlice(chainSges, index);
        ibv_sge.addr(sge, localAddress);
        ibv_sge.length(sge, byteLength);
        ibv_sge.lkey(sge, lkey);
        MemorySegment wr = ibv_send_wr.asSlice(chainWrs, index);
        ibv_send_wr.wr_id(wr, wrId);
        ibv_send_wr.next(wr, index + 1 < length ? ibv_send_wr.asSlice(chainWrs, index + 1) : MemorySegment.NULL);
        ibv_send_wr.sg_list(wr, sge);
        ibv_send_wr.num_sge(wr, 1);
        ibv_send_wr.opcode(wr, opcode);
        ibv_send_wr.send_flags(wr, index + 1 == length ? SIGNALED : 0);
        MemorySegment rdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(wr));
        ibv_send_wr.wr.rdma.remote_addr(rdma, remoteAddress);
        ibv_send_wr.wr.rdma.rkey(rdma, rkey);
    }

    /** Posts the chain written by {@link #prepareChained} with one {@code ibv_post_send}. */
    public int postChain() {
        return ops.postSend(chainWrs, badWr);
    }

    /** One signalled SEND of {@code length} bytes at {@code localAddress}. */
    public int postSend(long wrId, long localAddress, int length, int lkey) {
        ibv_send_wr.wr_id(messageWr, wrId);
        ibv_sge.addr(messageSge, localAddress);
        ibv_sge.length(messageSge, length);
        ibv_sge.lkey(messageSge, lkey);
        return ops.postSend(messageWr, badWr);
    }
}
