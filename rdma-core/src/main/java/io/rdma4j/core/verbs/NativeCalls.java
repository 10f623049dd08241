package io.rdma4j.core.verbs;

import io.rdma4j.core.RdmaException;
import io.rdma4j.nativeloader.Errno;
import io.rdma4j.nativeloader.bindings.RdmaBindings;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

/**
 * Control-path calls into libibverbs/librdmacm that report failures through errno. The generated bindings
 * do not capture errno, so these handles are made from the bindings' own addresses and descriptors with
 * {@link Errno#CAPTURE}. Only used outside the data path (setup, registration, teardown).
 */
final class NativeCalls {

    static final MethodHandle REG_MR = capture(RdmaBindings.ibv_reg_mr$address(), RdmaBindings.ibv_reg_mr$descriptor());
    static final MethodHandle ALLOC_PD = capture(RdmaBindings.ibv_alloc_pd$address(), RdmaBindings.ibv_alloc_pd$descriptor());
    static final MethodHandle CREATE_CQ = capture(RdmaBindings.ibv_create_cq$address(), RdmaBindings.ibv_create_cq$descriptor());
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

    private NativeCalls() {
    }

    private static MethodHandle capture(MemorySegment address, FunctionDescriptor descriptor) {
        return Linker.nativeLinker().downcallHandle(address, descriptor, Errno.CAPTURE);
    }

    /** Calls an int-returning function; non-zero means failure with errno. Returns errno (0 on success). */
    static int callInt(MethodHandle handle, Object... args) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = Errno.allocateState(arena);
            List<Object> all = new ArrayList<>(args.length + 1);
            all.add(state);
            all.addAll(List.of(args));
            int rc = (int) handle.invokeWithArguments(all);
            if (rc == 0) {
                return 0;
            }
            int errno = Errno.read(state);
            return errno == 0 ? (rc < 0 ? -rc : rc) : errno;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Like {@link #callInt} but throws an {@link RdmaException} naming {@code function} on failure. */
    static void check(String function, MethodHandle handle, Object... args) {
        int errno = callInt(handle, args);
        if (errno != 0) {
            throw new RdmaException(function + " failed: " + Errno.name(errno) + " (" + errno + ")");
        }
    }

    /** A pointer-returning call: the pointer, or NULL with errno in {@code errnoOut[0]}. */
    static MemorySegment callPointer(MethodHandle handle, int[] errnoOut, Object... args) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = Errno.allocateState(arena);
            List<Object> all = new ArrayList<>(args.length + 1);
            all.add(state);
            all.addAll(List.of(args));
            MemorySegment p = (MemorySegment) handle.invokeWithArguments(all);
            errnoOut[0] = p.equals(MemorySegment.NULL) ? Errno.read(state) : 0;
            return p;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** A pointer-returning call that throws an {@link RdmaException} on NULL. */
    static MemorySegment requirePointer(String function, MethodHandle handle, Object... args) {
        int[] errno = new int[1];
        MemorySegment p = callPointer(handle, errno, args);
        if (p.equals(MemorySegment.NULL)) {
            throw new RdmaException(function + " failed: " + Errno.name(errno[0]) + " (" + errno[0] + ")");
        }
        return p;
    }

    /** {@code ibv_wc_status_str(status)}. */
    static String wcStatus(int status) {
        return RdmaBindings.ibv_wc_status_str(status).reinterpret(64).getString(0);
    }

    /** {@code rdma_event_str(event)}. */
    static String cmEvent(int event) {
        return RdmaBindings.rdma_event_str(event).reinterpret(64).getString(0);
    }
}
