package io.rdma4j.nativeloader;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * RLIMIT_MEMLOCK as read from {@code /proc/self/limits}: every registered memory region is pinned
 * and counts against it, so a low limit makes {@code ibv_reg_mr} fail with ENOMEM.
 *
 * @param softBytes the soft limit in bytes, or -1 for unlimited
 * @param hardBytes the hard limit in bytes, or -1 for unlimited
 */
public record MemlockLimit(long softBytes, long hardBytes) {

    public static final long UNLIMITED = -1;
    /** Below this, registering large regions (e.g. shuffle buffers) is likely to fail. */
    public static final long RECOMMENDED_MINIMUM = 1L << 30;

    public static final Path PROC_SELF_LIMITS = Path.of("/proc/self/limits");

    /** Reads the limit of this process; empty when /proc is not there (not Linux). */
    public static Optional<MemlockLimit> current() {
        return Files.isReadable(PROC_SELF_LIMITS) ? Optional.of(read(PROC_SELF_LIMITS)) : Optional.empty();
    }

    /** Reads a file in {@code /proc/<pid>/limits} format. */
    public static MemlockLimit read(Path limitsFile) {
        try {
            return parse(Files.readAllLines(limitsFile));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Parses the "Max locked memory" row of {@code /proc/<pid>/limits}. */
    public static MemlockLimit parse(List<String> lines) {
        for (String line : lines) {
            if (line.startsWith("Max locked memory")) {
                String[] f = line.substring("Max locked memory".length()).trim().split("\\s+");
                if (f.length < 2) {
                    break;
                }
                return new MemlockLimit(value(f[0]), value(f[1]));
            }
        }
        throw new IllegalArgumentException("no 'Max locked memory' row in limits file");
    }

    private static long value(String s) {
        return "unlimited".equals(s) ? UNLIMITED : Long.parseLong(s);
    }

    public boolean unlimited() {
        return softBytes == UNLIMITED;
    }

    /** Advice when the soft limit is below {@link #RECOMMENDED_MINIMUM}. */
    public Optional<String> advice() {
        if (unlimited() || softBytes >= RECOMMENDED_MINIMUM) {
            return Optional.empty();
        }
        String raise = hardBytes == UNLIMITED || hardBytes >= RECOMMENDED_MINIMUM
                ? " (the hard limit " + format(hardBytes) + " allows raising it without root)"
                : "";
        return Optional.of("memlock " + format(softBytes) + " is too low for registering large regions: set "
                + "`ulimit -l unlimited`, `* - memlock unlimited` in /etc/security/limits.conf, "
                + "LimitMEMLOCK=infinity for systemd services, or `--ulimit memlock=-1` for containers" + raise);
    }

    @Override
    public String toString() {
        return "memlock soft " + format(softBytes) + ", hard " + format(hardBytes);
    }

    /** Human-readable size: {@code unlimited}, {@code 8 MiB}, {@code 512 KiB}, {@code 100 B}. */
    public static String format(long bytes) {
        if (bytes == UNLIMITED) {
            return "unlimited";
        }
        if (bytes >= (1L << 30) && bytes % (1L << 30) == 0) {
            return (bytes >> 30) + " GiB";
        }
        if (bytes >= (1L << 20) && bytes % (1L << 20) == 0) {
            return (bytes >> 20) + " MiB";
        }
        if (bytes >= 1024 && bytes % 1024 == 0) {
            return (bytes >> 10) + " KiB";
        }
        return bytes + " B";
    }
}
