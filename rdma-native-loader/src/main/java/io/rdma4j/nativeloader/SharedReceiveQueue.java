package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.ibv_recv_wr;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The receive side shared by several queue pairs ({@link Verbs#createSharedReceiveQueue}): a registered buffer
 * cut into equal slots, one receive work request per slot built once, reposted with {@code ibv_post_srq_recv}.
 * A slot's work request id is {@code idTag | slot}; the completion's {@code qp_num}
 * ({@link Completions#qpNum}) tells which queue pair the message came in on.
 *
 * <p>{@link #post} is thread-safe, because the completions of several connections repost slots from their own
 * threads: every slot has its own work request, scatter entry and {@code bad_wr} out-pointer, none of them
 * written after construction except by the provider on a failed post of that slot, and the provider serialises
 * posts on the SRQ with its own lock. So the native memory must come from an arena that every posting thread
 * can reach ({@link Arena#ofShared}, {@link Arena#ofAuto}, {@link Arena#global}); the constructor refuses a
 * confined one. What stays the caller's: a slot is posted at most once at a time, reposted only by whoever
 * consumed its completion.
 */
public final class SharedReceiveQueue {

    private final VerbsOps.SharedReceiveQueueOps ops;
    private final MemorySegment wrs;
    private final MemorySegment badWrs;
    private final int slots;

    /**
     * @param ops    the SRQ's posting verb ({@link VerbsOps#ofSharedReceiveQueue})
     * @param arena  owns the work requests; shared, since several threads post
     * @param buffer the registered receive buffer, {@code slots * slotSize} bytes
     * @param lkey   its local key
     * @param idTag  bits or-ed into every slot's work request id, to tell receives from sends
     */
    public SharedReceiveQueue(VerbsOps.SharedReceiveQueueOps ops, Arena arena, MemorySegment buffer, int slots,
                              int slotSize, int lkey, long idTag) {
        if (slots < 1 || slotSize < 1) {
            throw new IllegalArgumentException("a shared receive queue needs slots of at least 1 byte, got " + slots
                    + " slots of " + slotSize);
        }
        long slotBits = slots == 1 ? 0 : -1L >>> Long.numberOfLeadingZeros(slots - 1L);
        if ((idTag & slotBits) != 0) {
            throw new IllegalArgumentException("id tag " + Long.toHexString(idTag) + " overlaps the slot numbers 0.."
                    + (slots - 1));
        }
        this.ops = ops;
        this.slots = slots;
        wrs = ReceiveQueue.slotRequests(arena, buffer, slots, slotSize, lkey, idTag);
        if (!wrs.isAccessibleBy(new Thread(() -> { }))) {
            throw new IllegalArgumentException("a shared receive queue is posted from several threads: its arena must"
                    + " not be confined");
        }
        badWrs = arena.allocate(ValueLayout.ADDRESS, slots);
    }

    public int slots() {
        return slots;
    }

    /** Posts slot {@code slot}'s receive: 0, or an errno value (ENOMEM: the SRQ is full). */
    public int post(int slot) {
        if (slot < 0 || slot >= slots) {
            throw new IndexOutOfBoundsException("receive slot " + slot + " of " + slots);
        }
        return ops.postRecv(ibv_recv_wr.asSlice(wrs, slot),
                badWrs.asSlice(slot * ValueLayout.ADDRESS.byteSize(), ValueLayout.ADDRESS.byteSize()));
    }
}
