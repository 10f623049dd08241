package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.ibv_context;
import io.rdma4j.nativeloader.bindings.ibv_context_ops;
import io.rdma4j.nativeloader.bindings.ibv_cq;
import io.rdma4j.nativeloader.bindings.ibv_qp;

import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The data-path verbs that are {@code static inline} in {@code verbs.h} (so not exported by
 * libibverbs): {@code ibv_post_send}, {@code ibv_post_recv}, {@code ibv_poll_cq},
 * {@code ibv_req_notify_cq}. Like the C inlines, they call the provider's function pointers in
 * {@code qp->context->ops} / {@code cq->context->ops}. Every offset comes from the generated layouts;
 * the address-less downcall handles are created once and take the function pointer as first argument.
 *
 * <p>Arguments are the raw native pointers ({@code struct ibv_qp *}, {@code struct ibv_cq *}, ...);
 * zero-length segments as returned by the bindings are fine. Return values are those of the C
 * functions: 0 or an errno value for posts and notify, the number of completions (or negative) for poll.
 */
public final class VerbsOps {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle POST_SEND = LINKER.downcallHandle(ibv_context_ops.post_send.descriptor());
    private static final MethodHandle POST_RECV = LINKER.downcallHandle(ibv_context_ops.post_recv.descriptor());
    private static final MethodHandle POLL_CQ = LINKER.downcallHandle(ibv_context_ops.poll_cq.descriptor());
    private static final MethodHandle REQ_NOTIFY_CQ =
            LINKER.downcallHandle(ibv_context_ops.req_notify_cq.descriptor());

    // Offsets from the generated layouts (checked against gcc by LayoutOffsetsTest).
    private static final long QP_CONTEXT = ibv_qp.context$offset();
    private static final long CQ_CONTEXT = ibv_cq.context$offset();
    private static final long CTX_OPS = ibv_context.ops$offset();
    private static final long OPS_POST_SEND = CTX_OPS + ibv_context_ops.post_send$offset();
    private static final long OPS_POST_RECV = CTX_OPS + ibv_context_ops.post_recv$offset();
    private static final long OPS_POLL_CQ = CTX_OPS + ibv_context_ops.poll_cq$offset();
    private static final long OPS_REQ_NOTIFY_CQ = CTX_OPS + ibv_context_ops.req_notify_cq$offset();
    private static final long CONTEXT_SIZE = ibv_context.layout().byteSize();

    private VerbsOps() {
    }

    /** {@code ibv_post_send(qp, wr, bad_wr)}. */
    public static int postSend(MemorySegment qp, MemorySegment wr, MemorySegment badWr) {
        try {
            return (int) POST_SEND.invokeExact(op(qpContext(qp), OPS_POST_SEND), qp, wr, badWr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_post_recv(qp, wr, bad_wr)}. */
    public static int postRecv(MemorySegment qp, MemorySegment wr, MemorySegment badWr) {
        try {
            return (int) POST_RECV.invokeExact(op(qpContext(qp), OPS_POST_RECV), qp, wr, badWr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_poll_cq(cq, num_entries, wc)}: {@code wc} must hold {@code numEntries} {@code struct ibv_wc}. */
    public static int pollCq(MemorySegment cq, int numEntries, MemorySegment wc) {
        try {
            return (int) POLL_CQ.invokeExact(op(cqContext(cq), OPS_POLL_CQ), cq, numEntries, wc);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ibv_req_notify_cq(cq, solicited_only)}. */
    public static int reqNotifyCq(MemorySegment cq, boolean solicitedOnly) {
        try {
            return (int) REQ_NOTIFY_CQ.invokeExact(op(cqContext(cq), OPS_REQ_NOTIFY_CQ), cq, solicitedOnly ? 1 : 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Reads {@code qp->context}. */
    static MemorySegment qpContext(MemorySegment qp) {
        return qp.reinterpret(ibv_qp.layout().byteSize()).get(ibv_qp.context$layout(), QP_CONTEXT);
    }

    /** Reads {@code cq->context}. */
    static MemorySegment cqContext(MemorySegment cq) {
        return cq.reinterpret(ibv_cq.layout().byteSize()).get(ibv_cq.context$layout(), CQ_CONTEXT);
    }

    /** Reads the function pointer at {@code offset} inside {@code struct ibv_context}. */
    static MemorySegment op(MemorySegment context, long offset) {
        MemorySegment fn = context.reinterpret(CONTEXT_SIZE).get(ValueLayout.ADDRESS, offset);
        if (fn.equals(MemorySegment.NULL)) {
            // a provider that leaves an op NULL would crash the JVM if called
            throw new UnsupportedOperationException("provider has no ibv_context_ops entry at offset " + offset);
        }
        return fn;
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException(t);
    }
}
