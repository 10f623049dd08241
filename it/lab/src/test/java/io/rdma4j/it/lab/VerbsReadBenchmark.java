package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.file.Files;
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
 * Arguments: device name, address, kind, busy-poll (true/false), optionally {@code latency-only}. Prints one
 * line: {@code RESULT future=<us> wait=<us> bandwidth=<MiB/s> batched=<MiB/s>} (bandwidth: one {@code read} per
 * READ; batched: {@code readAll} of {@link #BW_BATCH}), or {@code LATENCY wait=<us>} (readAndWait only).
 * With {@code -Drdma4j.bench.cpu=N} the measuring thread moves to CPU N once connected (the JVM's other threads stay
 * where the JVM was started), as the benchmark pins ib_read_lat's client.
 */
public final class VerbsReadBenchmark {

    static final int LAT_ITERATIONS = 1000;
    static final int BW_ITERATIONS = 600;
    static final int BW_SIZE = 64 * 1024;
    // reads kept in flight, like ib_read_bw's send queue (its default tx-depth is 128; the NIC caps outstanding READs)
    static final int BW_OUTSTANDING = 64;
    // reads per readAll: one post list with one signalled completion (the API meant for throughput; ib_read_bw signals
    // every READ at 64 KiB: perftest turns its CQ moderation off for messages over 8 KiB)
    static final int BW_BATCH = 16;
    // until the JIT has compiled the path (slow on an emulated CPU): measured from the first read
    // (-Drdma4j.bench.warm-up-seconds=N lengthens it, to profile the steady state from outside)
    private static final long WARM_UP_NANOS = TimeUnit.SECONDS.toNanos(Long.getLong("rdma4j.bench.warm-up-seconds", 20));

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

            if (args.length > 4 && args[4].equals("latency-only")) {
                System.out.printf(Locale.ROOT, "LATENCY wait=%.1f%n", medianMicros(() -> connection.readAndWait(d, 0, small)));
                return;
            }
            double future = medianMicros(() -> connection.read(d, 0, small).get(60, TimeUnit.SECONDS));
            double wait = medianMicros(() -> connection.readAndWait(d, 0, small));

            for (int i = 0; i < BW_OUTSTANDING; i++) { // warm-up of the pipelined path
                connection.read(d, 0, sink.segment().asSlice(0, BW_SIZE)).get(60, TimeUnit.SECONDS);
            }
            long t0 = System.nanoTime();
            ArrayDeque<CompletableFuture<Void>> inFlight = new ArrayDeque<>();
            for (int i = 0; i < BW_ITERATIONS; i++) {
                if (inFlight.size() == BW_OUTSTANDING) {
                    inFlight.removeFirst().get(60, TimeUnit.SECONDS);
                }
                long off = (long) (i % BW_OUTSTANDING) * BW_SIZE;
                inFlight.add(connection.read(d, off, sink.segment().asSlice(off, BW_SIZE)));
            }
            for (CompletableFuture<Void> f : inFlight) {
                f.get(60, TimeUnit.SECONDS);
            }
            double bandwidth = (double) BW_ITERATIONS * BW_SIZE / (1 << 20) / ((System.nanoTime() - t0) / 1e9);
            double batched = batchedBandwidth(connection, d, sink);
            System.out.printf(Locale.ROOT, "RESULT future=%.1f wait=%.1f bandwidth=%.1f batched=%.1f%n", future, wait, bandwidth,
                    batched);
        }
    }

    /**
     * MiB/s of {@link #BW_ITERATIONS} 64 KiB READs posted by {@code readAll} in batches of {@link #BW_BATCH}, with
     * {@link #BW_OUTSTANDING} reads in flight: a batch is one post list whose last request alone is signalled.
     */
    private static double batchedBandwidth(RdmaConnection connection, RegionDescriptor d, RegisteredRegion sink) throws Exception {
        int batchesInFlight = BW_OUTSTANDING / BW_BATCH;
        for (int warm = 0; warm < batchesInFlight; warm++) {
            connection.readAll(batch(d, sink, 0)).get(60, TimeUnit.SECONDS);
        }
        long t0 = System.nanoTime();
        ArrayDeque<CompletableFuture<Void>> inFlight = new ArrayDeque<>();
        for (int b = 0; b < BW_ITERATIONS / BW_BATCH; b++) {
            if (inFlight.size() == batchesInFlight) {
                inFlight.removeFirst().get(60, TimeUnit.SECONDS);
            }
            inFlight.add(connection.readAll(batch(d, sink, b % batchesInFlight)));
        }
        for (CompletableFuture<Void> f : inFlight) {
            f.get(60, TimeUnit.SECONDS);
        }
        long bytes = (long) (BW_ITERATIONS / BW_BATCH) * BW_BATCH * BW_SIZE;
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

    private interface Read {
        void run() throws Exception;
    }

    /** Warms up for {@link #WARM_UP_NANOS}, then the median of {@link #LAT_ITERATIONS} reads, in microseconds. */
    private static double medianMicros(Read read) throws Exception {
        long warmUntil = System.nanoTime() + WARM_UP_NANOS;
        while (System.nanoTime() - warmUntil < 0) {
            read.run();
        }
        // one clock read per read, between consecutive reads, as ib_read_lat takes its time stamps
        long[] stamps = new long[LAT_ITERATIONS + 1];
        for (int i = 0; i < LAT_ITERATIONS; i++) {
            stamps[i] = System.nanoTime();
            read.run();
        }
        stamps[LAT_ITERATIONS] = System.nanoTime();
        long[] nanos = new long[LAT_ITERATIONS];
        for (int i = 0; i < LAT_ITERATIONS; i++) {
            nanos[i] = stamps[i + 1] - stamps[i];
        }
        Arrays.sort(nanos);
        return nanos[LAT_ITERATIONS / 2] / 1000.0;
    }
}
