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
    public static final int EINTR = 4;
    public static final int EIO = 5;
    public static final int EAGAIN = 11;
    public static final int ENOMEM = 12;
    public static final int EACCES = 13;
    public static final int EFAULT = 14;
    public static final int EBUSY = 16;
    public static final int ENODEV = 19;
    public static final int EINVAL = 22;
    public static final int ENOSYS = 38;
    public static final int EOPNOTSUPP = 95;
    public static final int EADDRINUSE = 98;
    public static final int EADDRNOTAVAIL = 99;
    public static final int ENETUNREACH = 101;
    public static final int ETIMEDOUT = 110;
    public static final int ECONNREFUSED = 111;
    public static final int EHOSTUNREACH = 113;

    /** Linker option to pass to {@code downcallHandle} so that the handle takes a capture segment first. */
    public static final Linker.Option CAPTURE = Linker.Option.captureCallState("errno");

    private static final StructLayout STATE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO =
            STATE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final Map<Integer, String> NAMES = Map.ofEntries(
            Map.entry(EPERM, "EPERM"), Map.entry(ENOENT, "ENOENT"), Map.entry(EINTR, "EINTR"),
            Map.entry(EIO, "EIO"), Map.entry(EAGAIN, "EAGAIN"), Map.entry(ENOMEM, "ENOMEM"),
            Map.entry(EACCES, "EACCES"), Map.entry(EFAULT, "EFAULT"), Map.entry(EBUSY, "EBUSY"),
            Map.entry(ENODEV, "ENODEV"), Map.entry(EINVAL, "EINVAL"), Map.entry(ENOSYS, "ENOSYS"),
            Map.entry(EOPNOTSUPP, "EOPNOTSUPP"), Map.entry(EADDRINUSE, "EADDRINUSE"),
            Map.entry(EADDRNOTAVAIL, "EADDRNOTAVAIL"), Map.entry(ENETUNREACH, "ENETUNREACH"),
            Map.entry(ETIMEDOUT, "ETIMEDOUT"), Map.entry(ECONNREFUSED, "ECONNREFUSED"), Map.entry(EHOSTUNREACH, "EHOSTUNREACH"));

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
