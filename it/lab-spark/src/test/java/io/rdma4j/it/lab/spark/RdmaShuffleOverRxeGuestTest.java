package io.rdma4j.it.lab.spark;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.it.lab.LabDevice;
import io.rdma4j.spark.LocalCluster;
import io.rdma4j.spark.RdmaShuffleManager;
import io.rdma4j.spark.ShuffleReadTotals;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A Spark local-cluster job (driver and two executor JVMs inside the lab guest) whose shuffle runs through
 * rdma4j on the verbs provider over Soft-RoCE rxe0, with {@code fallback=fail} so no block can come through
 * Spark's own transfer. Proves the result against one computed in plain Java, and that the remote blocks
 * were read by one-sided RDMA READ on verbs: Spark's remote read metrics, each executor's provider and
 * endpoint address, its READ counts, and no READ served in software (only the tcp provider serves them).
 */
class RdmaShuffleOverRxeGuestTest {

    private static final int RECORDS = 100_000;
    private static final int KEYS = 1_000;

    /** Set in the driver only: executors load this class too, to deserialise its closures. */
    private static LabDevice device;
    private static ShuffleReadTotals totals;
    private static JavaSparkContext sc;

    /** What one executor's shuffle manager reports about its rdma4j transport. */
    record ExecutorShuffleReport(String executorId, String provider, String endpointHost, long reads, long readErrors,
                                 long readBytes, long readsServedInSoftware) implements Serializable {

        static ExecutorShuffleReport ofThisExecutor() {
            RdmaShuffleManager manager = (RdmaShuffleManager) SparkEnv.get().shuffleManager();
            String provider = manager.provider().isDefined() ? manager.provider().get() : "(not started)";
            String host = manager.endpoint().isDefined() ? hostOf(manager.endpoint().get()) : "(none)";
            if (manager.transportMetrics().isEmpty()) {
                return new ExecutorShuffleReport(SparkEnv.get().executorId(), provider, host, 0, 0, 0, 0);
            }
            TransportMetrics metrics = manager.transportMetrics().get();
            TransportMetrics.Snapshot reads = metrics.snapshot(OperationType.READ);
            return new ExecutorShuffleReport(SparkEnv.get().executorId(), provider, host, reads.successes(), reads.errors(),
                    reads.bytes(), metrics.servedOperations(OperationType.READ));
        }

        private static String hostOf(InetSocketAddress address) {
            return address.getAddress() == null ? address.getHostString() : address.getAddress().getHostAddress();
        }
    }

    @BeforeAll
    static void startCluster() {
        device = LabDevice.current();
        long start = System.nanoTime();
        SparkConf conf = LocalCluster.rdmaConf("rdma4j-shuffle-over-" + device.name());
        // C1 only, as the guest suite's own JVM: under QEMU TCG a tiered executor JVM crashed (SIGSEGV at the entry
        // of a C1 method, in a map task) as a C2 version replaced it; without that replacement nothing is patched.
        conf.set("spark.executor.extraJavaOptions", conf.get("spark.executor.extraJavaOptions") + " -XX:TieredStopAtLevel=1");
        sc = LocalCluster.start(conf
                .set("spark.shuffle.rdma.provider", "verbs")
                .set("spark.shuffle.rdma.device", device.name())
                .set("spark.shuffle.rdma.address", device.address())
                // Spark's authentication on: every verbs connection between the executors proves the application's secret.
                .set("spark.authenticate", "true")
                .set("spark.authenticate.secret", "lab-application-secret-0123456789abcdef")
                // The emulated CPU is 10-30x slower than the host's.
                .set("spark.shuffle.rdma.connectTimeout", "60s")
                .set("spark.shuffle.rdma.operationTimeout", "90s")
                .set("spark.network.timeout", "600s")
                .set("spark.executor.heartbeatInterval", "30s")
                // Small slabs and batches: many READs in flight and blocks larger than a slab.
                .set("spark.shuffle.rdma.bufferSlabSize", "64k")
                .set("spark.shuffle.rdma.maxBytesInFlight", "1m"));
        totals = ShuffleReadTotals.attach(sc);
        System.out.printf("LAB-SPARK: local-cluster[2,1,1024] up with both executors in %d s%n",
                (System.nanoTime() - start) / 1_000_000_000L);
    }

    @AfterAll
    static void stopClusterAndKeepExecutorLogs() {
        try {
            if (sc != null) {
                sc.stop();
            }
        } finally {
            copyExecutorLogsToShare();
        }
    }

    @Test
    void reduceByKeyOverVerbsMatchesPlainJavaAndReadsRemoteBlocksByRdmaRead() throws Exception {
        long start = System.nanoTime();
        Map<Integer, Long> result = new TreeMap<>(sc.parallelize(IntStream.range(0, RECORDS).boxed().toList(), 4)
                .mapToPair(i -> new Tuple2<>(i % KEYS, (long) i * i))
                .reduceByKey(Long::sum, 4)
                .collectAsMap());
        long jobSeconds = (System.nanoTime() - start) / 1_000_000_000L;
        Map<Integer, Long> expected = new TreeMap<>();
        for (int i = 0; i < RECORDS; i++) {
            expected.merge(i % KEYS, (long) i * i, Long::sum);
        }
        assertThat(result).as("reduceByKey result").isEqualTo(expected);

        List<ExecutorShuffleReport> reports = reportOfEveryExecutor();
        long reads = reports.stream().mapToLong(ExecutorShuffleReport::reads).sum();
        long readBytes = reports.stream().mapToLong(ExecutorShuffleReport::readBytes).sum();
        System.out.printf("LAB-SPARK: reduceByKey over %d records in %d s; Spark shuffle read metrics: %d remote blocks, "
                        + "%d remote bytes, %d local blocks; rdma4j READs: %d ops, %d bytes; executors: %s%n",
                RECORDS, jobSeconds, totals.remoteBlocks(), totals.remoteBytes(), totals.localBlocks(), reads, readBytes, reports);

        assertThat(totals.remoteBlocks()).as("blocks read from the other executor").isPositive();
        assertThat(totals.remoteBytes()).as("bytes read from the other executor").isPositive();
        for (ExecutorShuffleReport report : reports) {
            assertThat(report.provider()).as("provider of executor %s", report.executorId()).isEqualTo("verbs");
            assertThat(report.endpointHost()).as("endpoint of executor %s", report.executorId()).isEqualTo(device.address());
            assertThat(report.readErrors()).as("failed READs of executor %s", report.executorId()).isZero();
            // The tcp provider answers READs in software and counts them; verbs READs never reach the peer's CPU.
            assertThat(report.readsServedInSoftware()).as("READs served in software by executor %s", report.executorId())
                    .isZero();
        }
        assertThat(reads).as("RDMA READs issued by the reducers").isPositive();
        assertThat(readBytes).as("bytes moved by RDMA READ cover every remote block").isGreaterThanOrEqualTo(totals.remoteBytes());
    }

    /** Runs a small job until both executors have answered once (tasks land where a core is free). */
    private static List<ExecutorShuffleReport> reportOfEveryExecutor() {
        Map<String, ExecutorShuffleReport> byExecutor = new TreeMap<>();
        for (int attempt = 0; attempt < 10 && byExecutor.size() < 2; attempt++) {
            for (ExecutorShuffleReport report : sc.parallelize(IntStream.range(0, 8).boxed().toList(), 8)
                    .map(i -> ExecutorShuffleReport.ofThisExecutor()).collect()) {
                byExecutor.putIfAbsent(report.executorId(), report);
            }
        }
        assertThat(byExecutor.keySet()).as("executors of local-cluster[2,1,1024] that reported").hasSize(2)
                .doesNotContain("driver");
        return new ArrayList<>(byExecutor.values());
    }

    /** The executors' logs live in the guest's tmpfs and vanish with it: keep them beside the JUnit reports. */
    private static void copyExecutorLogsToShare() {
        String share = System.getenv("RDMA_LAB_SHARE");
        Path work = LocalCluster.sparkHome().resolve("work");
        if (share == null || !Files.isDirectory(work)) {
            return;
        }
        Path target = Path.of(share, "spark-work");
        try (Stream<Path> files = Files.walk(work)) {
            for (Path file : files.filter(Files::isRegularFile)
                    .filter(f -> f.getFileName().toString().matches("std(out|err)")).collect(Collectors.toList())) {
                Path copy = target.resolve(work.relativize(file).toString());
                Files.createDirectories(copy.getParent());
                Files.copy(file, copy);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot copy the executor logs to " + target, e);
        }
    }
}
