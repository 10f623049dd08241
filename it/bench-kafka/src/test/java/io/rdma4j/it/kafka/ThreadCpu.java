package io.rdma4j.it.kafka;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Stream;

/**
 * CPU time by thread of this JVM at one moment: Java threads from the {@code ThreadMXBean}, and the JVM's own threads
 * (garbage collection, JIT compilers, the VM thread), which that bean does not list, from Linux's
 * {@code /proc/self/task/<tid>/schedstat} (none where there is no /proc). {@link #byNameSince} gives the CPU used
 * since, by thread name with digits dropped, the JVM's threads grouped by kind.
 */
final class ThreadCpu {

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    /** CPU ns by Java thread id. */
    private final Map<Long, Long> javaThreads;
    /** One of the JVM's own threads: its kind (label) and CPU ns. */
    private record JvmThread(String kind, long cpuNanos) {
    }

    /** By Linux task id, the JVM's own threads. */
    private final Map<Long, JvmThread> jvmThreads;

    private ThreadCpu(Map<Long, Long> javaThreads, Map<Long, JvmThread> jvmThreads) {
        this.javaThreads = javaThreads;
        this.jvmThreads = jvmThreads;
    }

    static ThreadCpu now() {
        Map<Long, Long> java = new HashMap<>();
        for (long id : THREADS.getAllThreadIds()) {
            java.put(id, THREADS.getThreadCpuTime(id));
        }
        return new ThreadCpu(java, jvmThreads());
    }

    /** CPU ns used since this snapshot, by thread name (digits as #) or JVM thread kind. */
    Map<String, Long> byNameSince() {
        ThreadCpu after = now();
        Map<String, Long> out = new HashMap<>();
        after.javaThreads.forEach((id, ns) -> {
            var info = THREADS.getThreadInfo(id);
            if (info != null && ns >= 0) {
                out.merge(info.getThreadName().replaceAll("\\d+", "#"), ns - javaThreads.getOrDefault(id, 0L), Long::sum);
            }
        });
        after.jvmThreads.forEach((tid, t) -> {
            JvmThread before = jvmThreads.get(tid);
            out.merge(t.kind(), t.cpuNanos() - (before == null ? 0 : before.cpuNanos()), Long::sum);
        });
        return out;
    }

    /**
     * CPU ns by thread name (Linux's, at most 15 characters, digits as #) of the processes {@code pids} together, from
     * /proc (empty where there is none): for processes other than this one, e.g. the exporter processes.
     */
    static Map<String, Long> ofProcesses(java.util.List<Long> pids) {
        Map<String, Long> out = new HashMap<>();
        for (long pid : pids) {
            Path tasks = Path.of("/proc", Long.toString(pid), "task");
            try (Stream<Path> list = Files.list(tasks)) {
                list.forEach(task -> {
                    try {
                        String name = Files.readString(task.resolve("comm")).strip().replaceAll("\\d+", "#");
                        out.merge(name, Long.parseLong(Files.readString(task.resolve("schedstat")).strip().split(" ")[0]), Long::sum);
                    } catch (IOException | RuntimeException ended) {
                        // the thread ended between the listing and the read
                    }
                });
            } catch (IOException | RuntimeException gone) {
                // no /proc, or the process ended
            }
        }
        return out;
    }

    /** {@code after} less {@code before}, name by name. */
    static Map<String, Long> since(Map<String, Long> before, Map<String, Long> after) {
        Map<String, Long> out = new HashMap<>();
        after.forEach((name, ns) -> out.put(name, ns - before.getOrDefault(name, 0L)));
        return out;
    }

    /** The {@code n} threads that used the most, with their ms. */
    static String top(Map<String, Long> cpu, int n) {
        return cpu.entrySet().stream().sorted(Map.Entry.<String, Long>comparingByValue().reversed()).limit(n)
                .map(e -> e.getKey() + " " + e.getValue() / 1_000_000).toList().toString();
    }

    static String top(Map<String, Long> cpu) {
        return top(cpu, 6);
    }

    private static Map<Long, JvmThread> jvmThreads() {
        Map<Long, JvmThread> out = new HashMap<>();
        Path tasks = Path.of("/proc/self/task");
        if (!Files.isDirectory(tasks)) {
            return out;
        }
        try (Stream<Path> list = Files.list(tasks)) {
            list.forEach(task -> {
                long tid = Long.parseLong(task.getFileName().toString());
                String kind = kind(comm(tid));
                if (kind != null) {
                    try {
                        out.put(tid, new JvmThread(kind, Long.parseLong(Files.readString(task.resolve("schedstat")).strip().split(" ")[0])));
                    } catch (IOException | RuntimeException ended) {
                        // the thread ended between the listing and the read
                    }
                }
            });
        } catch (IOException e) {
            return out;
        }
        return out;
    }

    private static String comm(long tid) {
        try {
            return Files.readString(Path.of("/proc/self/task", Long.toString(tid), "comm")).strip();
        } catch (IOException ended) {
            return "";
        }
    }

    /** The label of a JVM thread by its Linux name, or null for the threads the ThreadMXBean lists. */
    private static String kind(String comm) {
        if (comm.startsWith("GC Thread") || comm.startsWith("G1 ")) {
            return "(JVM: GC)";
        }
        if (comm.startsWith("C1 CompilerThre") || comm.startsWith("C2 CompilerThre")) {
            return "(JVM: JIT)";
        }
        if (comm.equals("VM Thread")) {
            return "(JVM: VM thread)";
        }
        return null;
    }
}
