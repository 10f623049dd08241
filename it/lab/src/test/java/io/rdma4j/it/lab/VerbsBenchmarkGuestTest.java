package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 3's benchmark: RDMA READ latency (8 B, median) and throughput (64 KiB) of the Java verbs provider
 * next to perftest's ib_read_lat / ib_read_bw on the same device in the same boot, printed as ratios.
 * Emulated devices: the figures are only comparable within one boot, so nothing here asserts on timing.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class VerbsBenchmarkGuestTest {

    private static final int LAT_ITERATIONS = 300;
    private static final int WARM_UP = 300;
    private static final int BW_ITERATIONS = 400;
    private static final int BW_SIZE = 64 * 1024;
    // reads kept in flight, like ib_read_bw's send queue (its default tx-depth is 128; the NIC caps outstanding READs)
    private static final int BW_OUTSTANDING = 64;
    private static final Duration RUN = Duration.ofSeconds(240);
    private static final Pattern LAT_ROW = Pattern.compile(
            "(?m)^\\s*8\\s+\\d+\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s");
    private static final Pattern BW_ROW = Pattern.compile(
            "(?m)^\\s*65536\\s+\\d+\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s");

    private final LabDevice device = LabDevice.current();

    @Test
    void javaReadLatencyAndThroughputNextToPerftest() throws Exception {
        double cLatency = Double.parseDouble(perftest("ib_read_lat", LAT_ROW, 18_700, "-s", "8", "-n",
                Integer.toString(LAT_ITERATIONS)).group(3)); // t_typical = median
        double cBandwidth = Double.parseDouble(perftest("ib_read_bw", BW_ROW, 18_701, "-s", Integer.toString(BW_SIZE),
                "-n", Integer.toString(BW_ITERATIONS)).group(2)); // BW average, MiB/s

        for (boolean busyPoll : new boolean[] {false, true}) {
            TransportConfig config = VerbsLab.config(device).toBuilder()
                    .providerOption("verbs.busy-poll", Boolean.toString(busyPoll)).build();
            double[] java = javaReadLatencyAndThroughput(config);
            assertThat(java[0]).isPositive();
            assertThat(java[1]).isPositive();
            assertThat(java[2]).isPositive();
            String mode = busyPoll ? "busy-poll" : "sleeping";
            System.out.printf("BENCHMARK %s (%s) READ 8 B median latency, readAndWait: Java %.1f us, ib_read_lat %.1f us, Java/C = %.2f%n",
                    device.name(), mode, java[2], cLatency, java[2] / cLatency);
            System.out.printf("BENCHMARK %s (%s) READ 8 B median latency, read().get(): Java %.1f us, ib_read_lat %.1f us, Java/C = %.2f%n",
                    device.name(), mode, java[0], cLatency, java[0] / cLatency);
            System.out.printf("BENCHMARK %s (%s) READ 64 KiB throughput (%d in flight): Java %.1f MiB/s, ib_read_bw %.1f MiB/s, Java/C = %.2f%n",
                    device.name(), mode, BW_OUTSTANDING, java[1], cBandwidth, java[1] / cBandwidth);
        }
        assertThat(cLatency).isPositive();
        assertThat(cBandwidth).isPositive();
    }

    /**
     * The median latency (us) of 8-byte READs one at a time through the future, the throughput (MiB/s) of
     * pipelined 64 KiB READs, and the median latency of 8-byte READs through readAndWait (the caller polls).
     */
    private double[] javaReadLatencyAndThroughput(TransportConfig config) throws Exception {
        try (Arena arena = Arena.ofShared(); VerbsGuestTest.Pair p = VerbsGuestTest.Pair.open(config, device)) {
            RegisteredRegion remote = p.server.register(arena.allocate(BW_SIZE * (long) BW_OUTSTANDING, 4096), Access.remoteRead());
            RegisteredRegion sink = p.client.register(arena.allocate(BW_SIZE * (long) BW_OUTSTANDING, 4096), Access.readSink());
            var d = remote.descriptor();
            for (int i = 0; i < WARM_UP; i++) {
                p.connection.read(d, 0, sink.segment().asSlice(0, 8)).get(60, TimeUnit.SECONDS);
            }
            long[] nanos = new long[LAT_ITERATIONS];
            for (int i = 0; i < LAT_ITERATIONS; i++) {
                long t0 = System.nanoTime();
                p.connection.read(d, 0, sink.segment().asSlice(0, 8)).get(60, TimeUnit.SECONDS);
                nanos[i] = System.nanoTime() - t0;
            }
            Arrays.sort(nanos);
            double latency = nanos[LAT_ITERATIONS / 2] / 1000.0;

            long t0 = System.nanoTime();
            List<CompletableFuture<Void>> inFlight = new ArrayList<>();
            for (int i = 0; i < BW_ITERATIONS; i++) {
                if (inFlight.size() == BW_OUTSTANDING) {
                    inFlight.removeFirst().get(60, TimeUnit.SECONDS);
                }
                long off = (long) (i % BW_OUTSTANDING) * BW_SIZE;
                inFlight.add(p.connection.read(d, off, sink.segment().asSlice(off, BW_SIZE)));
            }
            for (CompletableFuture<Void> f : inFlight) {
                f.get(60, TimeUnit.SECONDS);
            }
            double seconds = (System.nanoTime() - t0) / 1e9;

            MemorySegment small = sink.segment().asSlice(0, 8);
            for (int i = 0; i < WARM_UP; i++) {
                p.connection.readAndWait(d, 0, small);
            }
            for (int i = 0; i < LAT_ITERATIONS; i++) {
                long t1 = System.nanoTime();
                p.connection.readAndWait(d, 0, small);
                nanos[i] = System.nanoTime() - t1;
            }
            Arrays.sort(nanos);
            double waitLatency = nanos[LAT_ITERATIONS / 2] / 1000.0;
            return new double[] {latency, (double) BW_ITERATIONS * BW_SIZE / (1 << 20) / seconds, waitLatency};
        }
    }

    /** Runs a perftest server and client on the device's own address; the client's result row. */
    private Matcher perftest(String tool, Pattern row, int port, String... extra) throws Exception {
        List<String> base = new ArrayList<>(List.of(tool, "-d", device.name(), "-F", "-p", Integer.toString(port)));
        base.addAll(List.of(extra));
        if (device.kind() == LabDevice.Kind.SIW) {
            base.add("-R");
        }
        try (GuestCommand server = GuestCommand.start(base.toArray(String[]::new))) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (GuestCommand.run(Duration.ofSeconds(30), "ss", "-Hltn", "sport = :" + port).requireSuccess().isBlank()) {
                if (System.nanoTime() > deadline || !server.isAlive()) {
                    throw new AssertionError(tool + " server not listening:\n" + server.outputSoFar());
                }
                Thread.sleep(100);
            }
            List<String> client = new ArrayList<>(base);
            client.add(device.address());
            String out = GuestCommand.run(RUN, client.toArray(String[]::new)).requireSuccess();
            server.await(RUN);
            Matcher m = row.matcher(out);
            assertThat(m.find()).as("%s result row in:\n%s", tool, out).isTrue();
            return m;
        }
    }
}
