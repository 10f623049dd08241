package io.rdma4j.spark;

import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Configurator;
import org.apache.logging.log4j.core.config.Property;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** What happens when rdma4j cannot run on the executors, and settings it refuses. */
class RdmaShuffleFallbackTest {

    private static Map<Integer, Long> sums(JavaSparkContext sc) {
        return sc.parallelize(IntStream.range(0, 10_000).boxed().collect(Collectors.toList()), 4)
                .mapToPair(i -> new Tuple2<>(i % 10, 1L))
                .reduceByKey(Long::sum, 3)
                .collectAsMap();
    }

    private static String executorLogs(JavaSparkContext sc) throws IOException {
        Path app = LocalCluster.sparkHome().resolve("work").resolve(sc.sc().applicationId());
        StringBuilder all = new StringBuilder();
        try (Stream<Path> files = Files.walk(app)) {
            for (Path stderr : files.filter(p -> p.getFileName().toString().equals("stderr")).toList()) {
                all.append(Files.readString(stderr));
            }
        }
        return all.toString();
    }

    /** What {@code logger} logs in this JVM (the driver's) from now on; Spark has configured logging by then. */
    private static List<String> driverLog(Class<?> logger) {
        List<String> lines = new CopyOnWriteArrayList<>();
        AbstractAppender appender = new AbstractAppender("rdma4j-test-" + logger.getSimpleName(), null, null, true, Property.EMPTY_ARRAY) {
            @Override
            public void append(LogEvent event) {
                lines.add(event.getMessage().getFormattedMessage());
            }
        };
        appender.start();
        Configurator.setLevel(logger.getName(), Level.INFO);
        ((org.apache.logging.log4j.core.Logger) LogManager.getLogger(logger.getName())).addAppender(appender);
        return lines;
    }

    @Test
    void providerThatCannotRunFallsBackToSparkTransferWithOneLogLine() throws Exception {
        Path csv = PluginCsvMetrics.emptyDirectory(LocalCluster.target().resolve("fallback-metrics"));
        SparkConf conf = PluginCsvMetrics.enable(LocalCluster.rdmaConf("rdma4j-fallback-spark"), csv)
                .set("spark.shuffle.rdma.provider", "verbs") // no RDMA device on a test machine
                .set("spark.shuffle.rdma.fallback", "spark");
        try (JavaSparkContext sc = LocalCluster.start(conf)) {
            List<String> driverLog = driverLog(EndpointRegistry.class);
            assertThat(sums(sc)).containsExactlyInAnyOrderEntriesOf(
                    IntStream.range(0, 10).boxed().collect(Collectors.toMap(k -> k, k -> 1000L)));
            assertThat(sums(sc)).hasSize(10);
            List<String> unavailable = driverLog.stream().filter(l -> l.contains("runs without rdma4j")).toList();
            assertThat(unavailable).as("the driver says once per executor that it runs without rdma4j, and why")
                    .isNotEmpty().hasSizeLessThanOrEqualTo(2).allSatisfy(l -> assertThat(l).contains("verbs"));
            assertThat(unavailable.stream().map(l -> l.split(" ")[3]).distinct()).hasSameSizeAs(unavailable);
            String logs = executorLogs(sc);
            List<String> lines = logs.lines().filter(l -> l.contains("rdma4j shuffle cannot start on this executor")).toList();
            assertThat(lines).as("one line per executor that ran a shuffle task, saying why").isNotEmpty().hasSizeLessThanOrEqualTo(2);
            assertThat(lines.getFirst()).contains("spark.shuffle.rdma.fallback=spark");

            // The plugin counts the readers that fell back, by reason.
            Map<String, Map<String, Long>> metrics = PluginCsvMetrics.awaitPositive(csv, "fallbacks.transportUnavailable");
            assertThat(PluginCsvMetrics.sum(metrics, "fallbacks.transportUnavailable")).as("readers counted as fallbacks: " + metrics).isPositive();
            assertThat(metrics.values()).allSatisfy(m -> {
                assertThat(m.getOrDefault("provider.verbs", 0L)).isZero();
                assertThat(m.getOrDefault("provider.tcp", 0L)).isZero();
                assertThat(m.getOrDefault("blocksFetched", 0L)).isZero();
            });
        }
    }

    /**
     * Executors whose registered-memory limit (here {@code tcp.maxRegisteredBytes}, on verbs {@code RLIMIT_MEMLOCK})
     * refuses their large map outputs: committing a map task does not fail on it (eager registration), and readers
     * fetch those executors' blocks through Spark's transfer instead of failing the fetch, which would make Spark run
     * the map stage again and fail the same way. The one small map output fits and is registered.
     */
    @Test
    void mapOutputsAnExecutorCannotRegisterAreReadThroughSparkTransfer() throws Exception {
        LimitedRun run = groupUnderLimit("not-served", "fallbacks.notServed", Map.of(
                "spark.shuffle.rdma.registration", "eager",
                "spark.shuffle.rdma.tcp.maxRegisteredBytes", "96k",
                "spark.shuffle.rdma.bufferSlabSize", "4k"));
        assertThat(PluginCsvMetrics.sum(run.metrics(), "fallbacks.notServed")).as("executors' blocks fetched through Spark: " + run.metrics())
                .isPositive();
        assertThat(PluginCsvMetrics.sum(run.metrics(), "mapOutputsNotServed")).as("map outputs a reader asked for and that were refused")
                .isPositive();
        assertThat(PluginCsvMetrics.sum(run.metrics(), "mapOutputsRegistered")).as("the small map output fits the limit").isPositive();
        assertThat(run.executorLogs().lines().filter(l -> l.contains("blocks through Spark's block transfer (spark.shuffle.rdma.fallback=spark)")))
                .as("readers say why, once per executor whose blocks went through Spark").isNotEmpty()
                .allSatisfy(l -> assertThat(l).contains("cannot register map"));
        assertThat(run.executorLogs().lines().filter(l -> l.contains("cannot register shuffle 0 map")))
                .as("the executor that refused says which limit").isNotEmpty()
                .allSatisfy(l -> assertThat(l).contains("tcp.max-registered-bytes=98304"));
    }

    /**
     * Executors whose registered-memory limit has room for their map outputs but not for the reader's buffer pool (a
     * slab of 4 MiB past a limit of 2 MiB): readers fetch the remote blocks through Spark's transfer rather than failing
     * the fetch, which would blame a healthy peer and re-run the map stage.
     */
    @Test
    void aReaderThatCannotRegisterItsReadBuffersFetchesThroughSparkTransfer() throws Exception {
        LimitedRun run = groupUnderLimit("no-read-buffer", "fallbacks.noReadBuffer",
                Map.of("spark.shuffle.rdma.tcp.maxRegisteredBytes", "2m"));
        assertThat(PluginCsvMetrics.sum(run.metrics(), "fallbacks.noReadBuffer")).as("blocks fetched through Spark: " + run.metrics())
                .isPositive();
        assertThat(PluginCsvMetrics.sum(run.metrics(), "fallbacks.notServed")).as("every map output was served").isZero();
        assertThat(run.executorLogs().lines().filter(l -> l.contains("through Spark's block transfer (spark.shuffle.rdma.fallback=spark)")))
                .as("readers say why").isNotEmpty()
                .allSatisfy(l -> assertThat(l).contains("cannot register a buffer").contains("tcp.max-registered-bytes=2097152"));
    }

    /** The metrics (once {@code awaited} is positive) and executor logs of a grouping job under a registered-memory limit. */
    private record LimitedRun(Map<String, Map<String, Long>> metrics, String executorLogs) { }

    /**
     * Runs the grouping job, its result checked, on a cluster with {@code fallback=spark} and {@code limits} (the
     * executors' registered-memory limit and what goes with it).
     */
    private static LimitedRun groupUnderLimit(String name, String awaited, Map<String, String> limits) throws Exception {
        Path csv = PluginCsvMetrics.emptyDirectory(LocalCluster.target().resolve(name + "-metrics"));
        SparkConf conf = PluginCsvMetrics.enable(LocalCluster.rdmaConf("rdma4j-" + name), csv)
                .set("spark.shuffle.rdma.fallback", "spark");
        limits.forEach(conf::set);
        try (JavaSparkContext sc = LocalCluster.start(conf)) {
            assertGroupedPayloadsAreRight(sc);
            return new LimitedRun(PluginCsvMetrics.awaitPositive(csv, awaited), executorLogs(sc));
        }
    }

    /** Groups payloads by key through a shuffle of three partitions and checks every key's total. */
    private static void assertGroupedPayloadsAreRight(JavaSparkContext sc) {
        Map<Integer, Long> lengths = new java.util.TreeMap<>(sc.parallelize(IntStream.range(0, RECORDS).boxed().collect(Collectors.toList()), 4)
                .mapToPair(i -> new Tuple2<>(i % 50, payload(i)))
                .groupByKey(3) // no map-side combining: each large map output keeps its ~250 KB
                .mapValues(values -> {
                    long total = 0;
                    for (String v : values) {
                        total += v.length() + v.hashCode() % 7;
                    }
                    return total;
                })
                .collectAsMap());
        Map<Integer, Long> expected = new java.util.TreeMap<>();
        for (int i = 0; i < RECORDS; i++) {
            String v = payload(i);
            expected.merge(i % 50, (long) v.length() + v.hashCode() % 7, Long::sum);
        }
        assertThat(lengths).isEqualTo(expected);
    }

    private static final int RECORDS = 8_000;

    /** Map partition 0 (the first quarter of the records) writes values of 2 bytes, the others 100 random characters. */
    private static String payload(int i) {
        if (i < RECORDS / 4) {
            return "v" + (i % 10);
        }
        java.util.Random random = new java.util.Random(i);
        StringBuilder b = new StringBuilder(100);
        for (int c = 0; c < 100; c++) {
            b.append((char) ('!' + random.nextInt(90)));
        }
        return b.toString();
    }

    @Test
    void providerThatCannotRunFailsTheJobWhenFallbackIsFail() {
        SparkConf conf = LocalCluster.rdmaConf("rdma4j-fallback-fail")
                .set("spark.shuffle.rdma.provider", "verbs")
                .set("spark.shuffle.rdma.fallback", "fail")
                .set("spark.task.maxFailures", "1");
        try (JavaSparkContext sc = LocalCluster.start(conf)) {
            assertThatThrownBy(() -> sums(sc)).isInstanceOf(SparkException.class)
                    .hasMessageContaining("rdma4j shuffle cannot start on this executor (spark.shuffle.rdma.fallback=fail)");
        }
    }

    @Test
    void externalShuffleServiceIsRefusedWithAClearMessage() {
        SparkConf conf = new SparkConf().set("spark.shuffle.service.enabled", "true");
        assertThatThrownBy(() -> new RdmaShuffleManager(conf, true)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("spark.shuffle.service.enabled=false");
    }

    @Test
    void pushBasedShuffleIsRefused() {
        SparkConf conf = new SparkConf().set("spark.shuffle.push.enabled", "true");
        assertThatThrownBy(() -> new RdmaShuffleManager(conf, true)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("spark.shuffle.push.enabled=false");
    }

    @Test
    void badOptionsSayWhatIsExpected() {
        assertThatThrownBy(() -> RdmaShuffleConf.from(new SparkConf().set("spark.shuffle.rdma.fallback", "maybe")))
                .hasMessageContaining("'spark' or 'fail'");
        assertThatThrownBy(() -> RdmaShuffleConf.from(new SparkConf().set("spark.shuffle.rdma.bufferSlabSize", "3000")))
                .hasMessageContaining("power of two");
        RdmaShuffleConf defaults = RdmaShuffleConf.from(new SparkConf().set("spark.shuffle.rdma.provider", "tcp")
                .set("spark.shuffle.rdma.connectTimeout", "3s"));
        assertThat(defaults.transport().provider()).isEqualTo("tcp");
        assertThat(defaults.transport().connectTimeout()).hasSeconds(3);
        assertThat(defaults.maxBytesInFlight()).isEqualTo(48L << 20);
        assertThat(defaults.fallback()).isEqualTo(RdmaShuffleConf.Fallback.SPARK);
    }
}
