package io.rdma4j.it.lab;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 3's benchmark: RDMA READ latency (8 B, median) and throughput (64 KiB) of the Java verbs provider
 * next to perftest's ib_read_lat / ib_read_bw on the same device in the same boot, printed as ratios.
 * Emulated devices: the figures are only comparable within one boot, and even there they drift, so the
 * readAndWait latency and the one-read-per-READ throughput are measured in {@link #ROUNDS} rounds alternating with
 * ib_read_lat and ib_read_bw, and each round's ratio is printed with their median. The Java side warms up until its
 * JIT is idle ({@link VerbsReadBenchmark}) and says how long that took. Nothing here asserts on timing.
 * <p>Both sides measure on a CPU of their own: perftest's client runs on {@link #MEASURING_CPU} and its server on
 * {@link #OTHER_CPU}; the Java benchmark JVM starts on {@link #OTHER_CPU} and moves its measuring thread to
 * {@link #MEASURING_CPU}, so the progress thread, the JIT and the GC stay off it. Unpinned, the emulated guest's
 * scheduler made both sides flip between two speeds, about 2x apart, from one run to the next.
 * <p>The latency is also compared with the guest scheduler's wake-up preemption off ({@link #withoutWakeupPreemption}),
 * for both sides alike: on rxe that takes out a kernel round trip that costs a third of a READ and hits the two sides
 * unequally, so what is left is what each side itself does per READ.
 */
@Timeout(value = 1800, unit = TimeUnit.SECONDS)
class VerbsBenchmarkGuestTest {

    private static final int BW_SIZE = VerbsReadBenchmark.BW_SIZE;
    // the Java side's warm-up seconds per measurement, and whether the JIT was idle when each one began
    private static final String WARM_UP = "(warm-up-s=[\\d,]+ jit-idle=(?:true|false))";
    private static final Pattern RESULT = Pattern.compile(
            "RESULT future=(\\d+\\.\\d+) wait=(\\d+\\.\\d+) bandwidth=(\\d+\\.\\d+) batched=(\\d+\\.\\d+) " + WARM_UP);
    // four measurements, each warming up for up to 100 s
    private static final Duration RUN = Duration.ofSeconds(600);
    private static final Pattern LAT_ROW = Pattern.compile(
            "(?m)^\\s*8\\s+\\d+\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s");
    private static final Pattern BW_ROW = Pattern.compile(
            "(?m)^\\s*65536\\s+\\d+\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s");

    private static final int ROUNDS = 3;
    // more rounds where the ratio is steadier: what is left to vary is mostly C's slow spells
    private static final int ROUNDS_WITHOUT_WAKEUP_PREEMPTION = 5;
    private static final Pattern ROUND = Pattern.compile("ROUND wait=(\\d+\\.\\d+) bandwidth=(\\d+\\.\\d+) " + WARM_UP);
    private static final Pattern LATENCY = Pattern.compile("LATENCY wait=(\\d+\\.\\d+) " + WARM_UP);
    private static final Path SCHED_FEATURES = Path.of("/sys/kernel/debug/sched/features");

    private static final String MEASURING_CPU = "1";
    private static final String OTHER_CPU = "0";

    private final LabDevice device = LabDevice.current();

    @Test
    void javaReadLatencyAndThroughputNextToPerftest() throws Exception {
        assertThat(Runtime.getRuntime().availableProcessors()).as("guest CPUs (the benchmark pins to CPUs 0 and 1)")
                .isGreaterThanOrEqualTo(2);
        double[] cLatency = new double[ROUNDS];
        double[] cBandwidth = new double[ROUNDS];
        double[] javaLatency = new double[ROUNDS];
        double[] javaBandwidth = new double[ROUNDS];
        List<String> warmUps = new ArrayList<>();
        Matcher sleeping = null;
        for (int round = 0; round < ROUNDS; round++) {
            cLatency[round] = cLatency();
            cBandwidth[round] = cBandwidth();
            if (round == 0) { // the first round's JVM also measures what is printed once, below
                sleeping = javaBenchmark(false);
                javaLatency[round] = Double.parseDouble(sleeping.group(2));
                javaBandwidth[round] = Double.parseDouble(sleeping.group(3));
                warmUps.add(sleeping.group(5));
            } else {
                String out = runJava(false, "round");
                Matcher m = ROUND.matcher(out);
                assertThat(m.find()).as("round line in:\n%s", out).isTrue();
                javaLatency[round] = Double.parseDouble(m.group(1));
                javaBandwidth[round] = Double.parseDouble(m.group(2));
                warmUps.add(m.group(3));
            }
            assertThat(cLatency[round]).isPositive();
            assertThat(cBandwidth[round]).isPositive();
            assertThat(javaLatency[round]).isPositive();
            assertThat(javaBandwidth[round]).isPositive();
        }
        printWarmUps("sleeping", warmUps);
        System.out.printf("BENCHMARK %s (sleeping) READ 8 B median latency, readAndWait vs ib_read_lat in %d alternating rounds: %s%n",
                device.name(), ROUNDS, rounds(javaLatency, cLatency, "us"));
        System.out.printf("BENCHMARK %s (sleeping) READ 64 KiB throughput (%d in flight, one read per READ), Java vs ib_read_bw in %d alternating rounds: %s%n",
                device.name(), VerbsReadBenchmark.BW_OUTSTANDING, ROUNDS, rounds(javaBandwidth, cBandwidth, "MiB/s"));
        // the figures measured once are held against C's medians
        double cLatencyMedian = median(cLatency);
        double cBandwidthMedian = median(cBandwidth);
        printOnce("sleeping", sleeping, cLatencyMedian, cBandwidthMedian, false);
        latencyWithoutWakeupPreemption();
        Matcher busyPoll = javaBenchmark(true);
        printWarmUps("busy-poll", List.of(busyPoll.group(5)));
        printOnce("busy-poll", busyPoll, cLatencyMedian, cBandwidthMedian, true);
    }

    /**
     * readAndWait against ib_read_lat in alternating rounds, both with the guest's wake-up preemption off; on rxe only,
     * where the whole READ runs in the doorbell system call. A siw READ needs siw's and the network stack's kernel
     * threads on the caller's CPU too: without wake-up preemption they wait for the caller's next tick, and
     * ib_read_lat, which never yields, took 3993 us (one tick) per READ.
     */
    private void latencyWithoutWakeupPreemption() throws Exception {
        if (device.kind() != LabDevice.Kind.RXE) {
            System.out.printf("BENCHMARK %s (sleeping, no wake-up preemption) not measured: only rxe does the whole READ in the doorbell system call%n",
                    device.name());
            return;
        }
        double[] c = new double[ROUNDS_WITHOUT_WAKEUP_PREEMPTION];
        double[] java = new double[ROUNDS_WITHOUT_WAKEUP_PREEMPTION];
        List<String> warmUps = new ArrayList<>();
        for (int round = 0; round < c.length; round++) {
            int r = round;
            withoutWakeupPreemption(() -> {
                c[r] = cLatency();
                String out = runJava(false, "latency");
                Matcher m = LATENCY.matcher(out);
                assertThat(m.find()).as("latency line in:\n%s", out).isTrue();
                java[r] = Double.parseDouble(m.group(1));
                warmUps.add(m.group(2));
            });
            assertThat(c[round]).isPositive();
            assertThat(java[round]).isPositive();
        }
        printWarmUps("sleeping, no wake-up preemption", warmUps);
        System.out.printf("BENCHMARK %s (sleeping, no wake-up preemption) READ 8 B median latency, readAndWait vs ib_read_lat in %d alternating rounds, the guest's wake-up preemption off for both: %s%n",
                device.name(), c.length, rounds(java, c, "us"));
    }

    private interface GuestAction {
        void run() throws Exception;
    }

    /**
     * Runs {@code action} with the guest scheduler's wake-up preemption off (the {@code WAKEUP_PREEMPTION} feature in
     * debugfs), then turns it back on. Each rxe READ raises its responder tasklet from the doorbell system call, and so
     * wakes ksoftirqd; the tasklet then runs in that same system call, and the woken ksoftirqd preempts the caller on
     * its way out for nothing: two context switches, about a third of an 8 B READ. It preempted every Java READ and
     * 78-89 % of C's (a wake-up that does not preempt leaves ksoftirqd runnable, and the READs after it wake nothing
     * until it runs at a tick; see it/lab/verbs-benchmark-log.md). Off, ksoftirqd runs at a tick and finds nothing to
     * do, for both sides alike; on a NIC no READ involves it at all.
     */
    private static void withoutWakeupPreemption(GuestAction action) throws Exception {
        if (!Files.exists(SCHED_FEATURES)) {
            GuestCommand.run(Duration.ofSeconds(30), "mount", "-t", "debugfs", "debugfs", "/sys/kernel/debug").requireSuccess();
        }
        Files.writeString(SCHED_FEATURES, "NO_WAKEUP_PREEMPTION");
        try {
            assertThat(Files.readString(SCHED_FEATURES)).as("guest scheduler features").contains(" NO_WAKEUP_PREEMPTION ");
            action.run();
        } finally {
            Files.writeString(SCHED_FEATURES, "WAKEUP_PREEMPTION");
        }
    }

    /** The figures of one full Java run; with {@code all}, also those the alternating rounds already printed. */
    private void printOnce(String mode, Matcher java, double cLatency, double cBandwidth, boolean all) {
        double future = Double.parseDouble(java.group(1));
        double wait = Double.parseDouble(java.group(2));
        double bandwidth = Double.parseDouble(java.group(3));
        double batched = Double.parseDouble(java.group(4));
        assertThat(future).isPositive();
        assertThat(wait).isPositive();
        assertThat(bandwidth).isPositive();
        assertThat(batched).isPositive();
        if (all) {
            System.out.printf("BENCHMARK %s (%s) READ 8 B median latency, readAndWait: Java %.1f us, ib_read_lat median %.1f us, Java/C = %.2f%n",
                    device.name(), mode, wait, cLatency, wait / cLatency);
        }
        System.out.printf("BENCHMARK %s (%s) READ 8 B median latency, read().get(): Java %.1f us, ib_read_lat median %.1f us, Java/C = %.2f%n",
                device.name(), mode, future, cLatency, future / cLatency);
        if (all) {
            System.out.printf("BENCHMARK %s (%s) READ 64 KiB throughput (%d in flight): Java %.1f MiB/s, ib_read_bw median %.1f MiB/s, Java/C = %.2f%n",
                    device.name(), mode, VerbsReadBenchmark.BW_OUTSTANDING, bandwidth, cBandwidth, bandwidth / cBandwidth);
        }
        System.out.printf("BENCHMARK %s (%s) READ 64 KiB throughput (%d in flight, readAll of %d, one signalled completion each; ib_read_bw signals every READ): Java %.1f MiB/s, ib_read_bw median %.1f MiB/s, Java/C = %.2f%n",
                device.name(), mode, VerbsReadBenchmark.BW_OUTSTANDING, VerbsReadBenchmark.BW_BATCH, batched, cBandwidth,
                batched / cBandwidth);
    }

    // a figure taken while C2 was still compiling includes interpreted code: say so next to the figures
    private void printWarmUps(String mode, List<String> warmUps) {
        System.out.printf("BENCHMARK %s (%s) Java JIT warm-up per JVM (seconds per measurement; jit-idle=false: C2 still compiling at the limit): %s%n",
                device.name(), mode, String.join("; ", warmUps));
    }

    /** "j vs c unit (ratio), ...; median Java/C = m" (the median of the rounds' ratios). */
    private static String rounds(double[] java, double[] c, String unit) {
        double[] ratios = new double[java.length];
        StringBuilder text = new StringBuilder();
        for (int round = 0; round < java.length; round++) {
            ratios[round] = java[round] / c[round];
            text.append(String.format(Locale.ROOT, "%s%.1f vs %.1f %s (%.2f)", round == 0 ? "" : ", ", java[round], c[round],
                    unit, ratios[round]));
        }
        return text + String.format(Locale.ROOT, "; median Java/C = %.2f", median(ratios));
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    /** ib_read_bw's average for 64 KiB READs, in MiB/s. */
    private double cBandwidth() throws Exception {
        return Double.parseDouble(perftest("ib_read_bw", BW_ROW, 18_701, "-s", Integer.toString(BW_SIZE), "-n",
                Integer.toString(VerbsReadBenchmark.BW_ITERATIONS)).group(2));
    }

    /** ib_read_lat's median (t_typical) for 8-byte READs, in microseconds. */
    private double cLatency() throws Exception {
        return Double.parseDouble(perftest("ib_read_lat", LAT_ROW, 18_700, "-s", "8", "-n",
                Integer.toString(VerbsReadBenchmark.LAT_ITERATIONS)).group(3));
    }

    /** Runs {@link VerbsReadBenchmark} in its own JVM (normal JIT) and returns its result line. */
    private Matcher javaBenchmark(boolean busyPoll) throws Exception {
        String out = runJava(busyPoll);
        Matcher m = RESULT.matcher(out);
        assertThat(m.find()).as("benchmark result line in:\n%s", out).isTrue();
        return m;
    }

    private String runJava(boolean busyPoll, String... extra) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        // C2 only: under QEMU TCG, a JVM with tiered compilation has crashed (SIGSEGV at the verified entry point
        // of a C1 method while it was being replaced by its C2 version, in two threads at once): the emulator does
        // not always see the JIT patch code another vCPU is entering. Without tiers no compiled method is replaced.
        List<String> command = new ArrayList<>(List.of("taskset", "-c", OTHER_CPU, java, "--enable-native-access=ALL-UNNAMED",
                "-XX:-TieredCompilation", "-Drdma4j.bench.cpu=" + MEASURING_CPU, "-cp", System.getProperty("java.class.path"),
                VerbsReadBenchmark.class.getName(), device.name(), device.address(), device.kind().name(),
                Boolean.toString(busyPoll)));
        command.addAll(List.of(extra));
        return GuestCommand.run(RUN, command.toArray(String[]::new)).requireSuccess();
    }

    /** Runs a perftest server and client on the device's own address; the client's result row. */
    private Matcher perftest(String tool, Pattern row, int port, String... extra) throws Exception {
        List<String> base = new ArrayList<>(List.of(tool, "-d", device.name(), "-F", "-p", Integer.toString(port)));
        base.addAll(List.of(extra));
        if (device.kind() == LabDevice.Kind.SIW) {
            base.add("-R");
        }
        List<String> serverCommand = new ArrayList<>(List.of("taskset", "-c", OTHER_CPU));
        serverCommand.addAll(base);
        try (GuestCommand server = GuestCommand.start(serverCommand.toArray(String[]::new))) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (GuestCommand.run(Duration.ofSeconds(30), "ss", "-Hltn", "sport = :" + port).requireSuccess().isBlank()) {
                if (System.nanoTime() > deadline || !server.isAlive()) {
                    throw new AssertionError(tool + " server not listening:\n" + server.outputSoFar());
                }
                Thread.sleep(100);
            }
            List<String> client = new ArrayList<>(List.of("taskset", "-c", MEASURING_CPU));
            client.addAll(base);
            client.add(device.address());
            String out = GuestCommand.run(RUN, client.toArray(String[]::new)).requireSuccess();
            server.await(RUN);
            Matcher m = row.matcher(out);
            assertThat(m.find()).as("%s result row in:\n%s", tool, out).isTrue();
            return m;
        }
    }
}
