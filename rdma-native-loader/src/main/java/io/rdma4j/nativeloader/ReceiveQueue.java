package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.ibv_recv_wr;
import io.rdma4j.nativeloader.bindings.ibv_sge;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The receive side of one queue pair: a registered buffer cut into equal slots, one receive work request
 * per slot built once, reposted with {@code ibv_post_recv}. A slot's work request id is
 * {@code idTag | slot}. Native memory is owned by the caller's arena. Not thread-safe.
 */
public final class ReceiveQueue {

    private final VerbsOps.QueuePairOps ops;
    private final MemorySegment wrs;
    private final MemorySegment badWr;
    private final int slots;

    /**
     * @param buffer   the registered receive buffer, {@code slots * slotSize} bytes
     * @param lkey     its local key
     * @param idTag    bits or-ed into every slot's work request id, to tell receives from sends
     */
    public ReceiveQueue(VerbsOps.QueuePairOps ops, Arena arena, MemorySegment buffer, int slots, int slotSize, int lkey,
                        long idTag) {
        this.ops = ops;
        this.slots = slots;
        wrs = slotRequests(arena, buffer, slots, slotSize, lkey, idTag);
        badWr = arena.allocate(ValueLayout.ADDRESS);
    }

    /**
     * One receive work request per slot of {@code buffer} ({@code slots} slots of {@code slotSize} bytes, local key
     * {@code lkey}), with id {@code idTag | slot}, in {@code arena}: built once, posted again and again.
     */
    static MemorySegment slotRequests(Arena arena, MemorySegment buffer, int slots, int slotSize, int lkey, long idTag) {
        if (buffer.byteSize() < (long) slots * slotSize) {
            throw new IllegalArgumentException("receive buffer of " + buffer.byteSize() + " bytes holds fewer than "
                    + slots + " slots of " + slotSize);
        }
        MemorySegment wrs = ibv_recv_wr.allocateArray(slots, arena);
        MemorySegment sges = ibv_sge.allocateArray(slots, arena);
        for (int i = 0; i < slots; i++) {
            MemorySegment sge = ibv_sge.asSlice(sges, i);
            ibv_sge.addr(sge, buffer.address() + (long) i * slotSize);
            ibv_sge.length(sge, slotSize);
            ibv_sge.lkey(sge, lkey);
            MemorySegment wr = ibv_recv_wr.asSlice(wrs, i);
            ibv_recv_wr.wr_id(wr, idTag | i);
            ibv_recv_wr.next(wr, MemorySegment.NULL);
            ibv_recv_wr.sg_list(wr, sge);
            ibv_recv_wr.num_sge(wr, 1);
        }
        return wrs;
    }

    /** Posts slot {@code slot}'s receive: 0, or an errno value. */
    public int post(int slot) {
        if (slot < 0 || slot >= slots) {
            throw new IndexOutOfBoundsException("receive slot " + slot + " of " + slots);
        }
        return ops.postRecv(ibv_recv_wr.asSlice(wrs, slot), badWr);
    }
}
