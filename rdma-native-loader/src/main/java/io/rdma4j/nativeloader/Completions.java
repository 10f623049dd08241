package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.ibv_wc;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Polls one completion queue into a preallocated array of {@code struct ibv_wc} and reads the fields the
 * caller needs from it, without allocating. The entries stay valid until the next {@link #poll}. Not
 * thread-safe: the caller serialises polls.
 */
public final class Completions {

    private static final long WC_SIZE = ibv_wc.sizeof();
    private static final long WR_ID = ibv_wc.wr_id$offset();
    private static final long STATUS = ibv_wc.status$offset();
    private static final long BYTE_LEN = ibv_wc.byte_len$offset();
    private static final long QP_NUM = ibv_wc.qp_num$offset();

    private final VerbsOps.CompletionQueueOps ops;
    private final MemorySegment entries;
    private final int capacity;

    /** Up to {@code capacity} completions per poll of {@code ops}' CQ, the array owned by {@code arena}. */
    public Completions(VerbsOps.CompletionQueueOps ops, Arena arena, int capacity) {
        this.ops = ops;
        this.capacity = capacity;
        this.entries = ibv_wc.allocateArray(capacity, arena);
    }

    /** {@code ibv_poll_cq}: the number of completions now readable at 0..n-1, or a negative value on failure. */
    public int poll() {
        return ops.poll(capacity, entries);
    }

    /** {@code ibv_req_notify_cq(cq, 0)}: the next completion raises an event on the completion channel. */
    public int requestNotify() {
        return ops.requestNotify(false);
    }

    public long wrId(int index) {
        return entries.get(ibv_wc.wr_id$layout(), index * WC_SIZE + WR_ID);
    }

    /** {@code enum ibv_wc_status}: 0 is success. */
    public int status(int index) {
        return entries.get(ibv_wc.status$layout(), index * WC_SIZE + STATUS);
    }

    /** Bytes received, for a receive completion. */
    public int byteLength(int index) {
        return entries.get(ibv_wc.byte_len$layout(), index * WC_SIZE + BYTE_LEN);
    }

    /** The local queue pair's number: on a shared receive queue, which connection the message came in on. */
    public int qpNum(int index) {
        return entries.get(ibv_wc.qp_num$layout(), index * WC_SIZE + QP_NUM);
    }
}
