package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.RdmaBindings;
import io.rdma4j.nativeloader.bindings.ibv_async_event;
import io.rdma4j.nativeloader.bindings.ibv_comp_channel;
import io.rdma4j.nativeloader.bindings.ibv_context;
import io.rdma4j.nativeloader.bindings.ibv_cq;
import io.rdma4j.nativeloader.bindings.ibv_device_attr;
import io.rdma4j.nativeloader.bindings.ibv_mr;
import io.rdma4j.nativeloader.bindings.ibv_port_attr;
import io.rdma4j.nativeloader.bindings.ibv_qp;
import io.rdma4j.nativeloader.bindings.ibv_qp_attr;
import io.rdma4j.nativeloader.bindings.ibv_qp_init_attr;
import io.rdma4j.nativeloader.bindings.ibv_srq;
import io.rdma4j.nativeloader.bindings.ibv_srq_attr;
import io.rdma4j.nativeloader.bindings.ibv_srq_init_attr;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * libibverbs' control path as typed calls, in the manner of Netty's {@code Native}: protection domains,
 * completion channels and queues, memory registration and device queries. Failures throw
 * {@link NativeCallException} with the captured errno; teardown calls return the C result for the caller
 * to log. Handles are the raw native pointers, valid until destroyed here. The data path (posting and
 * polling) is in {@link SendQueue}, {@link ReceiveQueue}, {@link SharedReceiveQueue} and {@link Completions}.
 */
public final class Verbs {

    private Verbs() {
    }

    /** A registered memory region: its handle for {@link #deregisterMemory}, and its keys. */
    public record MemoryRegion(MemorySegment handle, int lkey, int rkey) {
    }

    /** What {@code ibv_query_srq} reports: the provider may round {@code maxWr} up from what was asked. */
    public record SharedReceiveQueueAttributes(int maxWr, int maxSge, int srqLimit) {
    }

    /** {@code ibv_alloc_pd(context)}. */
    public static MemorySegment allocateProtectionDomain(MemorySegment context) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            return NativeCall.pointer("ibv_alloc_pd", errno, (MemorySegment) NativeCall.ALLOC_PD.invokeExact(errno, context));
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** {@code ibv_dealloc_pd}: fails (EBUSY) while memory regions or queue pairs still use it. */
    public static int deallocateProtectionDomain(MemorySegment pd) {
        return RdmaBindings.ibv_dealloc_pd(pd);
    }

    /** {@code ibv_create_comp_channel(context)}. */
    public static MemorySegment createCompletionChannel(MemorySegment context) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            return NativeCall.pointer("ibv_create_comp_channel", errno,
                    (MemorySegment) NativeCall.CREATE_COMP_CHANNEL.invokeExact(errno, context))
                    .reinterpret(ibv_comp_channel.sizeof());
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /** The completion channel's file descriptor, to wait for events with a timeout ({@link Poll}). */
    public static int completionChannelFd(MemorySegment channel) {
        return ibv_comp_channel.fd(channel.reinterpret(ibv_comp_channel.sizeof()));
    }

    public static int destroyCompletionChannel(MemorySegment channel) {
        return RdmaBindings.ibv_destroy_comp_channel(channel);
    }

    /**
     * {@code ibv_get_cq_event} then {@code ibv_ack_cq_events(cq, 1)}: takes one event off the channel (blocks
     * when there is none). {@code scratch} holds two pointers ({@link #completionEventScratch}).
     *
     * @return whether an event was taken
     */
    public static boolean acknowledgeCompletionEvent(MemorySegment channel, MemorySegment scratch) {
        MemorySegment cqOut = scratch.asSlice(0, ValueLayout.ADDRESS.byteSize());
        MemorySegment contextOut = scratch.asSlice(ValueLayout.ADDRESS.byteSize(), ValueLayout.ADDRESS.byteSize());
        if (RdmaBindings.ibv_get_cq_event(channel, cqOut, contextOut) != 0) {
            return false;
        }
        RdmaBindings.ibv_ack_cq_events(cqOut.get(ValueLayout.ADDRESS, 0), 1);
        return true;
    }

    /** Memory for {@link #acknowledgeCompletionEvent}'s out-parameters, owned by {@code arena}. */
    public static MemorySegment completionEventScratch(Arena arena) {
        return arena.allocate(ValueLayout.ADDRESS, 2);
    }

    /** {@code ibv_create_cq(context, depth, NULL, channel, 0)}. */
    public static MemorySegment createCompletionQueue(MemorySegment context, int depth, MemorySegment channel) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            return NativeCall.pointer("ibv_create_cq", errno, (MemorySegment) NativeCall.CREATE_CQ.invokeExact(errno,
                    context, depth, MemorySegment.NULL, channel, 0)).reinterpret(ibv_cq.sizeof());
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    public static int destroyCompletionQueue(MemorySegment cq) {
        return RdmaBindings.ibv_destroy_cq(cq);
    }

    /**
     * {@code ibv_create_srq(pd, {max_wr, max_sge = 1, srq_limit})}: one receive queue that several queue pairs
     * take their receives from ({@link RdmaCm#createQueuePair(MemorySegment, MemorySegment, MemorySegment, int,
     * MemorySegment)}). The man page calls {@code srq_limit} irrelevant at creation, yet rxe and siw arm the
     * limit event with it; 0 leaves it unarmed.
     *
     * @param maxWr    receive work requests the queue holds
     * @param srqLimit fill level below which the provider raises {@code IBV_EVENT_SRQ_LIMIT_REACHED}, 0..maxWr
     * @throws NativeCallException with the errno (EINVAL: more than the device's max_srq_wr; EOPNOTSUPP: a
     *                             provider without SRQs)
     */
    public static MemorySegment createSharedReceiveQueue(MemorySegment pd, int maxWr, int srqLimit) {
        if (maxWr < 1) {
            throw new IllegalArgumentException("a shared receive queue needs at least 1 work request, got " + maxWr);
        }
        if (srqLimit < 0 || srqLimit > maxWr) {
            throw new IllegalArgumentException("srq limit " + srqLimit + " outside 0.." + maxWr);
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment init = ibv_srq_init_attr.allocate(a);
            MemorySegment attr = ibv_srq_init_attr.attr(init);
            ibv_srq_attr.max_wr(attr, maxWr);
            ibv_srq_attr.max_sge(attr, 1);
            ibv_srq_attr.srq_limit(attr, srqLimit);
            MemorySegment errno = Errno.allocateState(a);
            return NativeCall.pointer("ibv_create_srq", errno,
                    (MemorySegment) NativeCall.CREATE_SRQ.invokeExact(errno, pd, init)).reinterpret(ibv_srq.sizeof());
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
    }

    /**
     * {@code ibv_query_srq}.
     *
     * @throws NativeCallException EOPNOTSUPP from siw: its user-space provider (rdma-core 44) has no query_srq
     */
    public static SharedReceiveQueueAttributes querySharedReceiveQueue(MemorySegment srq) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = ibv_srq_attr.allocate(a);
            int rc = RdmaBindings.ibv_query_srq(srq, attr);
            if (rc != 0) {
                throw new NativeCallException("ibv_query_srq", Math.abs(rc));
            }
            return new SharedReceiveQueueAttributes(ibv_srq_attr.max_wr(attr), ibv_srq_attr.max_sge(attr),
                    ibv_srq_attr.srq_limit(attr));
        }
    }

    /** {@code qp->qp_num}: what {@link Completions#qpNum} reports for the queue pair's completions. */
    public static int queuePairNumber(MemorySegment qp) {
        return ibv_qp.qp_num(qp.reinterpret(ibv_qp.sizeof()));
    }

    /**
     * {@code ibv_destroy_srq}: 0 or an errno value (EBUSY while a queue pair still uses it, so destroy the queue
     * pairs first). Receives still posted are discarded without completions.
     */
    public static int destroySharedReceiveQueue(MemorySegment srq) {
        return RdmaBindings.ibv_destroy_srq(srq);
    }

    /**
     * {@code ibv_reg_mr(pd, address, length, flags)}.
     *
     * @throws NativeCallException with the errno (ENOMEM, EPERM, EAGAIN: RLIMIT_MEMLOCK; EFAULT: not mapped)
     */
    public static MemoryRegion registerMemory(MemorySegment pd, long address, long length, int accessFlags) {
        MemorySegment mr;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment errno = Errno.allocateState(a);
            mr = NativeCall.pointer("ibv_reg_mr", errno, (MemorySegment) NativeCall.REG_MR.invokeExact(errno, pd,
                    MemorySegment.ofAddress(address), length, accessFlags)).reinterpret(ibv_mr.sizeof());
        } catch (Throwable t) {
            throw NativeCall.rethrow(t);
        }
        return new MemoryRegion(mr, ibv_mr.lkey(mr), ibv_mr.rkey(mr));
    }

    /** {@code ibv_dereg_mr}: after it returns the NIC no longer touches the memory. */
    public static int deregisterMemory(MemoryRegion region) {
        return RdmaBindings.ibv_dereg_mr(region.handle());
    }

    /** {@code ibv_get_device_name(context->device)}. */
    public static String deviceName(MemorySegment context) {
        MemorySegment device = ibv_context.device(context.reinterpret(ibv_context.sizeof()));
        return RdmaBindings.ibv_get_device_name(device).reinterpret(RdmaBindings.IBV_SYSFS_NAME_MAX()).getString(0);
    }

    /** {@code ibv_query_port(...).max_msg_sz}: the longest message the port carries (0 when it says none). */
    public static long maxMessageSize(MemorySegment context, int port) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = ibv_port_attr.allocate(a);
            int rc = RdmaBindings.ibv_query_port(context, (byte) port, attr);
            if (rc != 0) {
                throw new NativeCallException("ibv_query_port", Math.abs(rc));
            }
            return Integer.toUnsignedLong(ibv_port_attr.max_msg_sz(attr));
        }
    }

    /** {@code min(max_qp_rd_atom, max_qp_init_rd_atom)} of {@code ibv_query_device}: RDMA READs in flight per QP. */
    public static int maxReadDepth(MemorySegment context) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = ibv_device_attr.allocate(a);
            int rc = RdmaBindings.ibv_query_device(context, attr);
            if (rc != 0) {
                throw new NativeCallException("ibv_query_device", Math.abs(rc));
            }
            return Math.min(ibv_device_attr.max_qp_rd_atom(attr), ibv_device_attr.max_qp_init_rd_atom(attr));
        }
    }

    /**
     * An asynchronous event of a device ({@code ibv_get_async_event}), acknowledged already: its
     * {@code enum ibv_event_type}, and for an event of a queue pair that queue pair's number (else -1).
     */
    public record AsyncEvent(int type, int queuePairNumber) {

        /** The event's name, as {@code ibv_event_type_str} spells it in libibverbs' enum. */
        public String name() {
            if (type == RdmaBindings.IBV_EVENT_QP_FATAL()) {
                return "IBV_EVENT_QP_FATAL";
            } else if (type == RdmaBindings.IBV_EVENT_QP_REQ_ERR()) {
                return "IBV_EVENT_QP_REQ_ERR";
            } else if (type == RdmaBindings.IBV_EVENT_QP_ACCESS_ERR()) {
                return "IBV_EVENT_QP_ACCESS_ERR";
            } else if (type == RdmaBindings.IBV_EVENT_QP_LAST_WQE_REACHED()) {
                return "IBV_EVENT_QP_LAST_WQE_REACHED";
            } else if (type == RdmaBindings.IBV_EVENT_SRQ_ERR()) {
                return "IBV_EVENT_SRQ_ERR";
            } else if (type == RdmaBindings.IBV_EVENT_CQ_ERR()) {
                return "IBV_EVENT_CQ_ERR";
            } else if (type == RdmaBindings.IBV_EVENT_DEVICE_FATAL()) {
                return "IBV_EVENT_DEVICE_FATAL";
            } else if (type == RdmaBindings.IBV_EVENT_PORT_ERR()) {
                return "IBV_EVENT_PORT_ERR";
            } else if (type == RdmaBindings.IBV_EVENT_PORT_ACTIVE()) {
                return "IBV_EVENT_PORT_ACTIVE";
            }
            return "ibv_event_type " + type;
        }

        /**
         * Whether the event says its queue pair is in the error state: a fatal, request or access error, or the last
         * receive it will take from its shared receive queue (which an SRQ's queue pair reports on entering it).
         */
        public boolean queuePairFailed() {
            return type == RdmaBindings.IBV_EVENT_QP_FATAL() || type == RdmaBindings.IBV_EVENT_QP_REQ_ERR()
                    || type == RdmaBindings.IBV_EVENT_QP_ACCESS_ERR() || type == RdmaBindings.IBV_EVENT_QP_LAST_WQE_REACHED();
        }
    }

    /**
     * {@code ibv_query_qp} of the state alone: whether {@code qp} is in the error state (false when the query fails).
     * What the device reports, not the state libibverbs last set.
     */
    public static boolean queuePairInError(MemorySegment qp) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = ibv_qp_attr.allocate(a);
            MemorySegment init = ibv_qp_init_attr.allocate(a);
            return RdmaBindings.ibv_query_qp(qp, attr, RdmaBindings.IBV_QP_STATE(), init) == 0
                    && ibv_qp_attr.qp_state(attr) == RdmaBindings.IBV_QPS_ERR();
        }
    }

    /** {@code context->async_fd}: readable while an asynchronous event waits ({@link #nextAsyncEvent}). */
    public static int asyncEventFd(MemorySegment context) {
        return ibv_context.async_fd(context.reinterpret(ibv_context.sizeof()));
    }

    /** Scratch memory for {@link #nextAsyncEvent}, owned by {@code arena}. */
    public static MemorySegment asyncEventScratch(Arena arena) {
        return ibv_async_event.allocate(arena);
    }

    /**
     * {@code ibv_get_async_event}, then {@code ibv_ack_async_event}: the next asynchronous event of {@code context}.
     * It blocks until there is one, so call it when {@link #asyncEventFd} is readable, from one thread.
     *
     * @throws NativeCallException when ibv_get_async_event fails
     */
    public static AsyncEvent nextAsyncEvent(MemorySegment context, MemorySegment scratch) {
        int rc = RdmaBindings.ibv_get_async_event(context, scratch);
        if (rc != 0) {
            throw new NativeCallException("ibv_get_async_event", Math.abs(rc));
        }
        int type = ibv_async_event.event_type(scratch);
        boolean ofQueuePair = type == RdmaBindings.IBV_EVENT_QP_FATAL() || type == RdmaBindings.IBV_EVENT_QP_REQ_ERR()
                || type == RdmaBindings.IBV_EVENT_QP_ACCESS_ERR() || type == RdmaBindings.IBV_EVENT_QP_LAST_WQE_REACHED()
                || type == RdmaBindings.IBV_EVENT_COMM_EST() || type == RdmaBindings.IBV_EVENT_SQ_DRAINED()
                || type == RdmaBindings.IBV_EVENT_PATH_MIG() || type == RdmaBindings.IBV_EVENT_PATH_MIG_ERR();
        int qpNum = ofQueuePair ? queuePairNumber(ibv_async_event.element.qp(ibv_async_event.element(scratch))) : -1;
        // acknowledged at once: ibv_destroy_qp waits until every event it reported about the queue pair is
        RdmaBindings.ibv_ack_async_event(scratch);
        return new AsyncEvent(type, qpNum);
    }

    /** {@code max_srq_wr} of {@code ibv_query_device}: receives one shared receive queue holds (0: no SRQ). */
    public static int maxSharedReceiveQueueDepth(MemorySegment context) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = ibv_device_attr.allocate(a);
            int rc = RdmaBindings.ibv_query_device(context, attr);
            if (rc != 0) {
                throw new NativeCallException("ibv_query_device", Math.abs(rc));
            }
            return ibv_device_attr.max_srq(attr) == 0 ? 0 : ibv_device_attr.max_srq_wr(attr);
        }
    }

    /** {@code max_cqe} of {@code ibv_query_device}: the most entries one completion queue holds. */
    public static int maxCompletionQueueDepth(MemorySegment context) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = ibv_device_attr.allocate(a);
            int rc = RdmaBindings.ibv_query_device(context, attr);
            if (rc != 0) {
                throw new NativeCallException("ibv_query_device", Math.abs(rc));
            }
            return ibv_device_attr.max_cqe(attr);
        }
    }

    /** {@code ibv_wc_status_str(status)}, e.g. {@code remote access error}. */
    public static String completionStatus(int status) {
        return RdmaBindings.ibv_wc_status_str(status).reinterpret(64).getString(0);
    }
}
