package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.RdmaBindings;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * Control-path downcalls that report failure through errno. The generated bindings do not capture errno
 * (the JVM may change it between two Java-level calls), so these handles are made from the bindings' own
 * addresses and descriptors with {@link Errno#CAPTURE}: each takes a capture segment first.
 */
final class NativeCall {

    static final MethodHandle REG_MR = capture(RdmaBindings.ibv_reg_mr$address(), RdmaBindings.ibv_reg_mr$descriptor());
    static final MethodHandle ALLOC_PD = capture(RdmaBindings.ibv_alloc_pd$address(), RdmaBindings.ibv_alloc_pd$descriptor());
    static final MethodHandle CREATE_CQ = capture(RdmaBindings.ibv_create_cq$address(), RdmaBindings.ibv_create_cq$descriptor());
    static final MethodHandle CREATE_SRQ = capture(RdmaBindings.ibv_create_srq$address(),
            RdmaBindings.ibv_create_srq$descriptor());
    static final MethodHandle CREATE_COMP_CHANNEL = capture(RdmaBindings.ibv_create_comp_channel$address(),
            RdmaBindings.ibv_create_comp_channel$descriptor());
    static final MethodHandle CREATE_EVENT_CHANNEL = capture(RdmaBindings.rdma_create_event_channel$address(),
            RdmaBindings.rdma_create_event_channel$descriptor());
    static final MethodHandle CREATE_ID = capture(RdmaBindings.rdma_create_id$address(), RdmaBindings.rdma_create_id$descriptor());
    static final MethodHandle BIND_ADDR = capture(RdmaBindings.rdma_bind_addr$address(), RdmaBindings.rdma_bind_addr$descriptor());
    static final MethodHandle LISTEN = capture(RdmaBindings.rdma_listen$address(), RdmaBindings.rdma_listen$descriptor());
    static final MethodHandle RESOLVE_ADDR = capture(RdmaBindings.rdma_resolve_addr$address(),
            RdmaBindings.rdma_resolve_addr$descriptor());
    static final MethodHandle RESOLVE_ROUTE = capture(RdmaBindings.rdma_resolve_route$address(),
            RdmaBindings.rdma_resolve_route$descriptor());
    static final MethodHandle CREATE_QP = capture(RdmaBindings.rdma_create_qp$address(), RdmaBindings.rdma_create_qp$descriptor());
    static final MethodHandle CONNECT = capture(RdmaBindings.rdma_connect$address(), RdmaBindings.rdma_connect$descriptor());
    static final MethodHandle ACCEPT = capture(RdmaBindings.rdma_accept$address(), RdmaBindings.rdma_accept$descriptor());
    static final MethodHandle GET_CM_EVENT = capture(RdmaBindings.rdma_get_cm_event$address(),
            RdmaBindings.rdma_get_cm_event$descriptor());

    private NativeCall() {
    }

    private static MethodHandle capture(MemorySegment address, FunctionDescriptor descriptor) {
        return Linker.nativeLinker().downcallHandle(address, descriptor, Errno.CAPTURE);
    }

    /** Throws {@link NativeCallException} naming {@code function} when the int-returning call failed. */
    static void check(String function, MemorySegment state, int rc) {
        if (rc != 0) {
            int errno = Errno.read(state);
            throw new NativeCallException(function, errno == 0 ? Math.abs(rc) : errno);
        }
    }

    /** Returns the pointer, or throws {@link NativeCallException} naming {@code function} when it is NULL. */
    static MemorySegment pointer(String function, MemorySegment state, MemorySegment p) {
        if (p.equals(MemorySegment.NULL)) {
            throw new NativeCallException(function, Errno.read(state));
        }
        return p;
    }

    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException(t);
    }
}
