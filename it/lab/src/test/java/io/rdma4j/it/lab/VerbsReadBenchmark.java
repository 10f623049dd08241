package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The Java side of VerbsBenchmarkGuestTest, in its own JVM so that it runs with the optimizing JIT (C2; the
 * guest suite's JVM stops at C1 to save emulated CPU) and alone. The responder transport keeps the
 * default sleeping progress mode (an RDMA READ never involves the responder's CPU, as with
 * {@code ib_read_lat}'s server); the requester uses the mode under test.
 * Arguments: device name, address, kind, busy-poll (true/false), optionally {@code round}, {@code latency} or
 * {@code trace} (see {@link #traceWindow}). Prints one
 * line: {@code RESULT future=<us> wait=<us> bandwidth=<MiB/s> batched=<MiB/s> <warm-up>} (bandwidth: one {@code read}
 * per READ; batched: {@code readAll} of {@link #BW_BATCH}), or with {@code round} only the figures compared in
 * alternating rounds, {@code ROUND wait=<us> bandwidth=<MiB/s> <warm-up>}, or with {@code latency} only
 * {@code LATENCY wait=<us> <warm-up>}; {@code <warm-up>} is {@link WarmUp#summary}.
 * With {@code -Drdma4j.bench.cpu=N} the measuring thread moves to CPU N once connected (the JVM's other threads stay
 * where the JVM was started), as the benchmark pins ib_read_lat's client.
 */
public final class VerbsReadBenchmark {

    static final int LAT_ITERATIONS = 1000;
    // about 5 s of transfer per measurement on the lab's devices (600 gave about 1 s, and rounds that drifted)
    static final int BW_ITERATIONS = 2400;
    static final int BW_SIZE = 64 * 1024;
    // reads kept in flight, like ib_read_bw's send queue (its default tx-depth is 128; the NIC caps outstanding READs)
    static final int BW_OUTSTANDING = 64;
    // reads per readAll: one post list with one signalled completion (the API meant for throughput; ib_read_bw signals
    // every READ at 64 KiB: perftest turns its CQ moderation off for messages over 8 KiB)
    static final int BW_BATCH = 16;
    // Each measurement warms up for at least this long (-Drdma4j.bench.warm-up-seconds=N lengthens it, to profile
    // the steady state from outside), and then until the JIT has been idle for JIT_QUIET_NANOS: under TCG, C2 was
    // still compiling the read path 35 s into a run, with the measuring and progress threads interpreted.
    private static final long WARM_UP_NANOS = TimeUnit.SECONDS.toNanos(Long.getLong("rdma4j.bench.warm-up-seconds", 20));
    private static final long JIT_QUIET_NANOS = TimeUnit.SECONDS.toNanos(3);
    // a warm-up that never sees the JIT idle this long is reported as such, not waited for
    private static final long WARM_UP_LIMIT_NANOS = TimeUnit.SECONDS.toNanos(100);
    // reads per warm-up step of a latency measurement: short steps, so that the timed loop is entered often enough
    // to be compiled as a method
    private static final int WARM_UP_READS_PER_STEP = 50;
    // reads after the warm-up in trace mode: the script starts its trace a second into this window
    private static final long TRACE_WINDOW_NANOS = TimeUnit.SECONDS.toNanos(5);

    private VerbsReadBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        LabDevice device = new LabDevice(args[0], args[1], LabDevice.Kind.valueOf(args[2].toUpperCase(Locale.ROOT)));
        TransportConfig requester = VerbsLab.config(device).toBuilder().providerOption("verbs.busy-poll", args[3]).build();
        try (Arena arena = Arena.ofShared();
             RdmaTransport server = RdmaTransport.open(VerbsLab.config(device));
             RdmaTransport client = RdmaTransport.open(requester)) {
            RdmaListener listener = server.listen(new InetSocketAddress(device.address(), 0), c -> { });
            RdmaConnection connection = client.connect(listener.localAddress()).get(60, TimeUnit.SECONDS);
            RegisteredRegion remote = server.register(arena.allocate(BW_SIZE * (long) BW_OUTSTANDING, 4096), Access.remoteRead());
            RegisteredRegion sink = client.register(arena.allocate(BW_SIZE * (long) BW_OUTSTANDING, 4096), Access.readSink());
            RegionDescriptor d = remote.descriptor();
            MemorySegment small = sink.segment().asSlice(0, 8);
            String cpu = System.getProperty("rdma4j.bench.cpu");
            if (cpu != null) {
                pinThisThread(cpu);
            }

            List<WarmUp> warmUps = new ArrayList<>();
            String mode = args.length > 4 ? args[4] : "all";
            if (mode.equals("trace")) {
                traceWindow(() -> connection.readAndWait(d, 0, small), warmUps);
                return;
            }
            if (mode.equals("latency") || mode.equals("round")) {
                double wait = medianMicros(() -> connection.readAndWait(d, 0, small), warmUps);
                if (mode.equals("latency")) {
                    System.out.printf(Locale.ROOT, "LATENCY wait=%.1f %s%n", wait, WarmUp.summary(warmUps));
                    return;
                }
                double bandwidth = warmedThroughput(reads -> pipelined(connection, d, sink, reads), warmUps);
                System.out.printf(Locale.ROOT, "ROUND wait=%.1f bandwidth=%.1f %s%n", wait, bandwidth, WarmUp.summary(warmUps));
                return;
            }
            double future = medianMicros(() -> connection.read(d, 0, small).get(60, TimeUnit.SECONDS), warmUps);
            double wait = medianMicros(() -> connection.readAndWait(d, 0, small), warmUps);
            double bandwidth = warmedThroughput(reads -> pipelined(connection, d, sink, reads), warmUps);
            double batched = warmedThroughput(reads -> batched(connection, d, sink, reads), warmUps);
            System.out.printf(Locale.ROOT, "RESULT future=%.1f wait=%.1f bandwidth=%.1f batched=%.1f %s%n", future, wait,
                    bandwidth, batched, WarmUp.summary(warmUps));
        }
    }

    /** Warms {@code loop} up (see {@link WarmUp#until}) on short runs, then its MiB/s over {@link #BW_ITERATIONS} READs. */
    private static double warmedThroughput(Throughput loop, List<WarmUp> warmUps) throws Exception {
        warmUps.add(WarmUp.until(() -> loop.mibPerSecond(BW_OUTSTANDING * 2)));
        return loop.mibPerSecond(BW_ITERATIONS);
    }

    private interface Throughput {
        double mibPerSecond(int reads) throws Exception;
    }

    /** MiB/s of {@code reads} 64 KiB READs, one {@code read} each, with {@link #BW_OUTSTANDING} in flight. */
    private static double pipelined(RdmaConnection connection, RegionDescriptor d, RegisteredRegion sink, int reads)
            throws Exception {
        long t0 = System.nanoTime();
        ArrayDeque<CompletableFuture<Void>> inFlight = new ArrayDeque<>();
        for (int i = 0; i < reads; i++) {
            if (inFlight.size() == BW_OUTSTANDING) {
                inFlight.removeFirst().get(60, TimeUnit.SECONDS);
            }
            long off = (long) (i % BW_OUTSTANDING) * BW_SIZE;
            inFlight.add(connection.read(d, off, sink.segment().asSlice(off, BW_SIZE)));
        }
        for (CompletableFuture<Void> f : inFlight) {
            f.get(60, TimeUnit.SECONDS);
        }
        return (double) reads * BW_SIZE / (1 << 20) / ((System.nanoTime() - t0) / 1e9);
    }

    /**
     * MiB/s of {@code reads} 64 KiB READs posted by {@code readAll} in batches of {@link #BW_BATCH}, with
     * {@link #BW_OUTSTANDING} reads in flight: a batch is one post list whose last request alone is signalled.
     */
    private static double batched(RdmaConnection connection, RegionDescriptor d, RegisteredRegion sink, int reads)
            throws Exception {
        int batchesInFlight = BW_OUTSTANDING / BW_BATCH;
        long t0 = System.nanoTime();
        ArrayDeque<CompletableFuture<Void>> inFlight = new ArrayDeque<>();
        for (int b = 0; b < reads / BW_BATCH; b++) {
            if (inFlight.size() == batchesInFlight) {
                inFlight.removeFirst().get(60, TimeUnit.SECONDS);
            }
            inFlight.add(connection.readAll(batch(d, sink, b % batchesInFlight)));
        }
        for (CompletableFuture<Void> f : inFlight) {
            f.get(60, TimeUnit.SECONDS);
        }
        long bytes = (long) (reads / BW_BATCH) * BW_BATCH * BW_SIZE;
        return (double) bytes / (1 << 20) / ((System.nanoTime() - t0) / 1e9);
    }

    /** Batch {@code slot}'s reads: each into its own 64 KiB of the sink, so no two reads in flight share bytes. */
    private static List<ReadRequest> batch(RegionDescriptor d, RegisteredRegion sink, int slot) {
        List<ReadRequest> reads = new ArrayList<>(BW_BATCH);
        for (int i = 0; i < BW_BATCH; i++) {
            long off = ((long) slot * BW_BATCH + i) * BW_SIZE;
            reads.add(new ReadRequest(d, off, sink.segment().asSlice(off, BW_SIZE)));
        }
        return reads;
    }

    /** Moves the calling thread alone to {@code cpu}: taskset on its thread id, read from /proc/thread-self. */
    private static void pinThisThread(String cpu) throws Exception {
        String tid = Files.readSymbolicLink(Path.of("/proc/thread-self")).getFileName().toString();
        Process taskset = new ProcessBuilder("taskset", "-p", "-c", cpu, tid).redirectErrorStream(true).start();
        String out = new String(taskset.getInputStream().readAllBytes());
        if (taskset.waitFor() != 0) {
            throw new IllegalStateException("taskset -p -c " + cpu + " " + tid + " failed: " + out);
        }
    }

    /** Runs {@code stamps.length - 1} reads, stamping the clock before each and after the last. */
    private static void timedReads(Read read, long[] stamps) throws Exception {
        int reads = stamps.length - 1;
        // one clock read per read, between consecutive reads, as ib_read_lat takes its time stamps
        for (int i = 0; i < reads; i++) {
            stamps[i] = System.nanoTime();
            read.run();
        }
        stamps[reads] = System.nanoTime();
    }

    private interface Read {
        void run() throws Exception;
    }

    /**
     * Warms up (see {@link WarmUp#until}), then the median of {@link #LAT_ITERATIONS} reads, in microseconds. The
     * warm-up runs the timed loop itself, as C's is compiled: a loop of 1000 reads entered once stays in the
     * interpreter (C2 compiles a loop after about 10,000 iterations).
     */
    private static double medianMicros(Read read, List<WarmUp> warmUps) throws Exception {
        long[] warmUpStamps = new long[WARM_UP_READS_PER_STEP + 1];
        warmUps.add(WarmUp.until(() -> timedReads(read, warmUpStamps)));
        long[] stamps = new long[LAT_ITERATIONS + 1];
        timedReads(read, stamps);
        long[] nanos = new long[LAT_ITERATIONS];
        for (int i = 0; i < LAT_ITERATIONS; i++) {
            nanos[i] = stamps[i + 1] - stamps[i];
        }
        Arrays.sort(nanos);
        return nanos[LAT_ITERATIONS / 2] / 1000.0;
    }

    /**
     * For trace-read-path.sh: warms {@code read} up as {@link #medianMicros} does, prints {@code TRACE-WINDOW <warm-up>},
     * then keeps reading for {@link #TRACE_WINDOW_NANOS}, while the script traces the kernel from outside.
     */
    private static void traceWindow(Read read, List<WarmUp> warmUps) throws Exception {
        long[] stamps = new long[WARM_UP_READS_PER_STEP + 1];
        warmUps.add(WarmUp.until(() -> timedReads(read, stamps)));
        System.out.println("TRACE-WINDOW " + WarmUp.summary(warmUps));
        System.out.flush();
        long end = System.nanoTime() + TRACE_WINDOW_NANOS;
        while (System.nanoTime() - end < 0) {
            timedReads(read, stamps);
        }
    }

    /** How long one measurement warmed up, and whether the JIT had gone idle by then. */
    private record WarmUp(double seconds, boolean jitIdle) {

        // reading /proc costs system calls: look a few times a second
        private static final long CHECK_EVERY_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

        /**
         * Runs {@code step} for at least {@link #WARM_UP_NANOS} and then until the JIT's compiler threads have used
         * no CPU for {@link #JIT_QUIET_NANOS}, or until {@link #WARM_UP_LIMIT_NANOS}.
         */
        static WarmUp until(Read step) throws Exception {
            long start = System.nanoTime();
            long compilerTicks = JitActivity.compilerCpuTicks();
            long lastCompiled = start;
            long nextCheck = start + CHECK_EVERY_NANOS;
            while (true) {
                step.run();
                long now = System.nanoTime();
                if (now - nextCheck < 0) {
                    continue;
                }
                nextCheck = now + CHECK_EVERY_NANOS;
                long ticks = JitActivity.compilerCpuTicks();
                if (ticks != compilerTicks) {
                    compilerTicks = ticks;
                    lastCompiled = now;
                }
                boolean idle = now - lastCompiled >= JIT_QUIET_NANOS;
                if ((idle && now - start >= WARM_UP_NANOS) || now - start >= WARM_UP_LIMIT_NANOS) {
                    return new WarmUp((now - start) / 1e9, idle);
                }
            }
        }

        /** {@code warm-up-s=<s>,<s>,... jit-idle=<true when every warm-up ended with the JIT idle>}. */
        static String summary(List<WarmUp> warmUps) {
            StringBuilder seconds = new StringBuilder();
            boolean idle = true;
            for (WarmUp w : warmUps) {
                seconds.append(seconds.isEmpty() ? "" : ",").append(String.format(Locale.ROOT, "%.0f", w.seconds));
                idle &= w.jitIdle;
            }
            return "warm-up-s=" + seconds + " jit-idle=" + idle;
        }
    }

    /** CPU time of this JVM's JIT compiler threads, from /proc (Linux): the compile queue has no standard API. */
    private static final class JitActivity {

        private static final Path TASKS = Path.of("/proc/self/task");

        private JitActivity() {
        }

        /** Summed user and system clock ticks of the threads named "C1/C2 CompilerThread..." now alive. */
        static long compilerCpuTicks() throws IOException {
            long ticks = 0;
            try (DirectoryStream<Path> tasks = Files.newDirectoryStream(TASKS)) {
                for (Path task : tasks) {
                    try {
                        String name = Files.readString(task.resolve("comm"));
                        if (name.startsWith("C1 Compiler") || name.startsWith("C2 Compiler")) {
                            String stat = Files.readString(task.resolve("stat"));
                            // fields after "(comm)": state is field 3, utime 14 and stime 15
                            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                            ticks += Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
                        }
                    } catch (NoSuchFileException exited) {
                        // a compiler thread that ended between the listing and the read adds nothing
                    }
                }
            }
            return ticks;
        }
    }
}
