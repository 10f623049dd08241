package io.rdma4j.core.internal;

import io.rdma4j.core.verbs.MessageBufferSizing;
import io.rdma4j.nativeloader.MemlockLimit;

import java.util.Optional;

/**
 * The doctor's memlock section: what a number of verbs connections registers for message buffers at the given
 * settings ({@code sizing} as the provider sees them, its messages carrying the transport's header), and whether this process's {@code RLIMIT_MEMLOCK} holds it. Regions and buffer pools the application
 * registers come on top, so the section says how much room the limit leaves for them.
 */
final class MemlockAdvice {

    private MemlockAdvice() {
    }

    static String text(MessageBufferSizing sizing, String settings, int connections, Optional<MemlockLimit> limit) {
        long needed = sizing.bytesFor(connections);
        StringBuilder out = new StringBuilder("memlock: verbs registers message buffers shared by its connections (")
                .append(settings).append("), about ").append(size(sizing.bytesPerConnection())).append(" more per connection; ")
                .append(connections).append(connections == 1 ? " connection needs " : " connections need ")
                .append(size(needed)).append(", plus the regions and pools the application registers")
                .append(System.lineSeparator());
        if (limit.isEmpty()) {
            return out.append("  this process's memlock limit is unknown (no /proc/self/limits)").append(System.lineSeparator())
                    .toString();
        }
        MemlockLimit l = limit.get();
        if (l.unlimited()) {
            return out.append("  this host allows it: the limit is unlimited").append(System.lineSeparator()).toString();
        }
        if (needed <= l.softBytes()) {
            out.append("  this host allows it: the soft limit ").append(MemlockLimit.format(l.softBytes()))
                    .append(" leaves ").append(size(l.softBytes() - needed)).append(" for regions and pools");
        } else {
            int holds = sizing.connectionsWithin(l.softBytes());
            out.append("  this host does not allow it: the soft limit ").append(MemlockLimit.format(l.softBytes()))
                    .append(" holds ").append(holds).append(" connection").append(holds == 1 ? "" : "s")
                    .append("; raise it (`ulimit -l unlimited`, LimitMEMLOCK=infinity, `--ulimit memlock=-1`)");
            if (l.hardBytes() == MemlockLimit.UNLIMITED || l.hardBytes() >= needed) {
                out.append(" (the hard limit ").append(MemlockLimit.format(l.hardBytes())).append(" allows raising it without root)");
            }
        }
        return out.append(System.lineSeparator()).toString();
    }

    /** Bytes as a reader takes them in: {@code 4.5 MiB}, {@code 288 MiB}, {@code 4.5 GiB}, {@code 900 KiB}. */
    static String size(long bytes) {
        if (bytes >= 1L << 30) {
            return one(bytes / (double) (1L << 30)) + " GiB";
        }
        if (bytes >= 1L << 20) {
            return one(bytes / (double) (1L << 20)) + " MiB";
        }
        return bytes >= 1024 ? one(bytes / 1024.0) + " KiB" : bytes + " B";
    }

    private static String one(double v) {
        return v >= 100 || v == Math.rint(v) ? String.valueOf(Math.round(v)) : String.format(java.util.Locale.ROOT, "%.1f", v);
    }
}
