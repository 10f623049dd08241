package io.rdma4j.nativeloader;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * {@code poll(2)} on one file descriptor with a timeout: lets the threads that wait on a completion
 * channel or an rdma_cm event channel wake up regularly and notice that they should stop, since
 * {@code ibv_get_cq_event} and {@code rdma_get_cm_event} themselves block without a timeout.
 */
public final class Poll {

    public static final short POLLIN = 0x1;

    private static final StructLayout POLLFD = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("fd"), ValueLayout.JAVA_SHORT.withName("events"),
            ValueLayout.JAVA_SHORT.withName("revents"));
    private static final VarHandle FD = POLLFD.varHandle(MemoryLayout.PathElement.groupElement("fd"));
    private static final VarHandle EVENTS = POLLFD.varHandle(MemoryLayout.PathElement.groupElement("events"));
    private static final VarHandle REVENTS = POLLFD.varHandle(MemoryLayout.PathElement.groupElement("revents"));
    // int poll(struct pollfd *fds, nfds_t nfds, int timeout)
    private static final MethodHandle POLL = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().findOrThrow("poll"),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));

    private final MemorySegment pollfd;

    private Poll(MemorySegment pollfd) {
        this.pollfd = pollfd;
    }

    /** A reusable poller for {@code fd} (readability), its native memory owned by {@code arena}. */
    public static Poll forReading(int fd, Arena arena) {
        MemorySegment s = arena.allocate(POLLFD);
        FD.set(s, 0L, fd);
        EVENTS.set(s, 0L, POLLIN);
        return new Poll(s);
    }

    /** Waits at most {@code timeoutMillis} for the descriptor to become readable; true when it is. */
    public boolean awaitReadable(int timeoutMillis) {
        REVENTS.set(pollfd, 0L, (short) 0);
        int n;
        try {
            n = (int) POLL.invokeExact(pollfd, 1L, timeoutMillis);
        } catch (Throwable t) {
            throw new IllegalStateException("poll(2) failed", t);
        }
        return n > 0 && ((short) REVENTS.get(pollfd, 0L) & POLLIN) != 0;
    }
}
