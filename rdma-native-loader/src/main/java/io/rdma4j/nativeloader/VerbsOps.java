package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.ibv_context;
import io.rdma4j.nativeloader.bindings.ibv_context_ops;
import io.rdma4j.nativeloader.bindings.ibv_cq;
import io.rdma4j.nativeloader.bindings.ibv_qp;
import io.rdma4j.nativeloader.bindings.ibv_srq;

import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The data-path verbs that are {@code static inline} in {@code verbs.h} (so not exported by
 * libibverbs): {@code ibv_post_send}, {@code ibv_post_recv}, {@code ibv_post_srq_recv}, {@code ibv_poll_cq},
 * {@code ibv_req_notify_cq}. Like the C inlines, they call the provider's function pointers in
 * {@code qp->context->ops} / {@code srq->context->ops} / {@code cq->context->ops}. Every offset comes from
 * the generated layouts; the address-less downcall handles are created once and take the function pointer
 * as first argument.
 *
 * <p>{@link #ofQueuePair}, {@link #ofSharedReceiveQueue} and {@link #ofCompletionQueue} read the function
 * pointers once, when a queue pair, SRQ or CQ is created: a provider sets {@code context->ops} when it opens the device and never changes them,
 * and following {@code qp->context->ops} on every post and poll cost up to 0.5 µs per RDMA READ in the
 * emulated lab (0.4–0.5 µs in one JVM, nothing measurable in another). Arguments are the raw native pointers ({@code struct ibv_qp *}, {@code struct ibv_cq *},
 * ...); zero-length segments as returned by the bindings are fine. Return values are those of the C
 * functions: 0 or an errno value for posts and notify, the number of completions (or negative) for poll.
 *
 * <p>The handles are not {@link Linker.Option#critical critical}: measured in the lab that saved another
 * 0.1 µs per READ only, and a soft provider's {@code post_send} is a system call (rxe performs the whole
 * READ inside it), too long to hold off the JVM's safepoints.
 */
public final class VerbsOps {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle POST_SEND = LINKER.downcallHandle(ibv_context_ops.post_send.descriptor());
    private static final MethodHandle POST_RECV = LINKER.downcallHandle(ibv_context_ops.post_recv.descriptor());
    private static final MethodHandle POST_SRQ_RECV =
            LINKER.downcallHandle(ibv_context_ops.post_srq_recv.descriptor());
    private static final MethodHandle POLL_CQ = LINKER.downcallHandle(ibv_context_ops.poll_cq.descriptor());
    private static final MethodHandle REQ_NOTIFY_CQ =
            LINKER.downcallHandle(ibv_context_ops.req_notify_cq.descriptor());

    // Offsets from the generated layouts (checked against gcc by LayoutOffsetsTest).
    private static final long QP_CONTEXT = ibv_qp.context$offset();
    private static final long CQ_CONTEXT = ibv_cq.context$offset();
    private static final long SRQ_CONTEXT = ibv_srq.context$offset();
    private static final long CTX_OPS = ibv_context.ops$offset();
    private static final long OPS_POST_SEND = CTX_OPS + ibv_context_ops.post_send$offset();
    private static final long OPS_POST_RECV = CTX_OPS + ibv_context_ops.post_recv$offset();
    private static final long OPS_POST_SRQ_RECV = CTX_OPS + ibv_context_ops.post_srq_recv$offset();
    private static final long OPS_POLL_CQ = CTX_OPS + ibv_context_ops.poll_cq$offset();
    private static final long OPS_REQ_NOTIFY_CQ = CTX_OPS + ibv_context_ops.req_notify_cq$offset();
    private static final long CONTEXT_SIZE = ibv_context.layout().byteSize();

    private VerbsOps() {
    }

    /**
     * The posting verbs of the queue pair {@code qp}, valid until it is destroyed.
     *
     * @throws UnsupportedOperationException if the provider left one of them NULL (calling it would crash the JVM)
     */
    public static QueuePairOps ofQueuePair(MemorySegment qp) {
        MemorySegment context = qpContext(qp);
        return new QueuePairOps(qp, op(context, OPS_POST_SEND), op(context, OPS_POST_RECV));
    }

    /**
     * The posting verb of the shared receive queue {@code srq}, valid until it is destroyed.
     *
     * @throws UnsupportedOperationException if the provider left it NULL (calling it would crash the JVM)
     */
    public static SharedReceiveQueueOps ofSharedReceiveQueue(MemorySegment srq) {
        return new SharedReceiveQueueOps(srq, op(srqContext(srq), OPS_POST_SRQ_RECV));
    }

    /**
     * The polling verbs of the completion queue {@code cq}, valid until it is destroyed.
     *
     * @throws UnsupportedOperationException if the provider left one of them NULL (calling it would crash the JVM)
     */
    public static CompletionQueueOps ofCompletionQueue(MemorySegment cq) {
        MemorySegment context = cqContext(cq);
        return new CompletionQueueOps(cq, op(context, OPS_POLL_CQ), op(context, OPS_REQ_NOTIFY_CQ));
    }

    /** {@code ibv_post_send} and {@code ibv_post_recv} of one queue pair. */
    public static final class QueuePairOps {
        private final MemorySegment qp;
        private final MemorySegment postSend;
        private final MemorySegment postRecv;

        private QueuePairOps(MemorySegment qp, MemorySegment postSend, MemorySegment postRecv) {
            this.qp = qp;
            this.postSend = postSend;
            this.postRecv = postRecv;
        }

        /** {@code ibv_post_send(qp, wr, bad_wr)}. */
        public int postSend(MemorySegment wr, MemorySegment badWr) {
            try {
                return (int) POST_SEND.invokeExact(postSend, qp, wr, badWr);
            } catch (Throwable t) {
                throw rethrow(t);
            }
        }

        /** {@code ibv_post_recv(qp, wr, bad_wr)}. */
        public int postRecv(MemorySegment wr, MemorySegment badWr) {
            try {
                return (int) POST_RECV.invokeExact(postRecv, qp, wr, badWr);
            } catch (Throwable t) {
                throw rethrow(t);
            }
        }
    }

    /**
     * {@code ibv_post_srq_recv} of one shared receive queue. Safe to call from several threads at once as far
     * as this class goes (it holds no mutable state); the providers serialise posts on the SRQ with their
     * own lock, as the verbs API requires.
     */
    public static final class SharedReceiveQueueOps {
        private final MemorySegment srq;
        private final MemorySegment postSrqRecv;

        private SharedReceiveQueueOps(MemorySegment srq, MemorySegment postSrqRecv) {
            this.srq = srq;
            this.postSrqRecv = postSrqRecv;
        }

        /** {@code ibv_post_srq_recv(srq, wr, bad_wr)}. */
        public int postRecv(MemorySegment wr, MemorySegment badWr) {
            try {
                return (int) POST_SRQ_RECV.invokeExact(postSrqRecv, srq, wr, badWr);
            } catch (Throwable t) {
                throw rethrow(t);
            }
        }
    }

    /** {@code ibv_poll_cq} and {@code ibv_req_notify_cq} of one completion queue. */
    public static final class CompletionQueueOps {
        private final MemorySegment cq;
        private final MemorySegment pollCq;
        private final MemorySegment reqNotifyCq;

        private CompletionQueueOps(MemorySegment cq, MemorySegment pollCq, MemorySegment reqNotifyCq) {
            this.cq = cq;
            this.pollCq = pollCq;
            this.reqNotifyCq = reqNotifyCq;
        }

        /** {@code ibv_poll_cq(cq, num_entries, wc)}: {@code wc} must hold {@code numEntries} {@code struct ibv_wc}. */
        public int poll(int numEntries, MemorySegment wc) {
            try {
                return (int) POLL_CQ.invokeExact(pollCq, cq, numEntries, wc);
            } catch (Throwable t) {
                throw rethrow(t);
            }
        }

        /** {@code ibv_req_notify_cq(cq, solicited_only)}. */
        public int requestNotify(boolean solicitedOnly) {
            try {
                return (int) REQ_NOTIFY_CQ.invokeExact(reqNotifyCq, cq, solicitedOnly ? 1 : 0);
            } catch (Throwable t) {
                throw rethrow(t);
            }
        }
    }

    /** Reads {@code qp->context}. */
    static MemorySegment qpContext(MemorySegment qp) {
        return qp.reinterpret(ibv_qp.layout().byteSize()).get(ibv_qp.context$layout(), QP_CONTEXT);
    }

    /** Reads {@code srq->context}. */
    static MemorySegment srqContext(MemorySegment srq) {
        return srq.reinterpret(ibv_srq.layout().byteSize()).get(ibv_srq.context$layout(), SRQ_CONTEXT);
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
