package io.rdma4j.nativeloader;

import java.lang.foreign.Arena;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;
import java.util.Map;

/**
 * errno support for downcalls made with {@link Linker.Option#captureCallState(String...)}: the JVM may
 * itself change errno between two Java-level calls, so errno must be captured by the linker.
 */
public final class Errno {

    public static final int EPERM = 1;
    public static final int ENOENT = 2;
    public static final int ENOMEM = 12;
    public static final int EACCES = 13;
    public static final int ENODEV = 19;
    public static final int EINVAL = 22;
    public static final int ENOSYS = 38;
    public static final int EOPNOTSUPP = 95;

    /** Linker option to pass to {@code downcallHandle} so that the handle takes a capture segment first. */
    public static final Linker.Option CAPTURE = Linker.Option.captureCallState("errno");

    private static final StructLayout STATE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO =
            STATE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final Map<Integer, String> NAMES = Map.ofEntries(
            Map.entry(EPERM, "EPERM"), Map.entry(ENOENT, "ENOENT"), Map.entry(4, "EINTR"),
            Map.entry(5, "EIO"), Map.entry(11, "EAGAIN"), Map.entry(ENOMEM, "ENOMEM"),
            Map.entry(EACCES, "EACCES"), Map.entry(14, "EFAULT"), Map.entry(16, "EBUSY"),
            Map.entry(ENODEV, "ENODEV"), Map.entry(EINVAL, "EINVAL"), Map.entry(ENOSYS, "ENOSYS"),
            Map.entry(EOPNOTSUPP, "EOPNOTSUPP"), Map.entry(98, "EADDRINUSE"),
            Map.entry(99, "EADDRNOTAVAIL"), Map.entry(101, "ENETUNREACH"), Map.entry(110, "ETIMEDOUT"),
            Map.entry(111, "ECONNREFUSED"), Map.entry(113, "EHOSTUNREACH"));

    private Errno() {
    }

    /** Allocates a capture-state segment in {@code arena}. */
    public static MemorySegment allocateState(Arena arena) {
        return arena.allocate(STATE_LAYOUT);
    }

    /** Reads errno from a capture-state segment filled by a downcall. */
    public static int read(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /** Symbolic name such as {@code ENOSYS}, or {@code errno 123} when unknown. */
    public static String name(int errno) {
        return NAMES.getOrDefault(errno, "errno " + errno);
    }
}
