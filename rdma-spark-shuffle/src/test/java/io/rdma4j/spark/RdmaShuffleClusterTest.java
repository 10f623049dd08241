package io.rdma4j.spark;

import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Shuffles across two real executor JVMs through rdma4j (tcp provider, fallback=fail so nothing is
 * silently read through Spark's transfer) and compares every result with the one computed directly.
 */
class RdmaShuffleClusterTest {

    private static JavaSparkContext sc;
    private static SparkSession spark;
    private static ShuffleReadTotals totals;

    private static Path metricsDir;

    @BeforeAll
    static void start() throws IOException {
        metricsDir = PluginCsvMetrics.emptyDirectory(LocalCluster.target().resolve("cluster-test-metrics"));
        sc = LocalCluster.start(PluginCsvMetrics.enable(LocalCluster.rdmaConf("rdma4j-shuffle-test")
                // Small slabs so that one test's blocks exceed a slab; small batches so that many reads are in flight.
                .set("spark.shuffle.rdma.bufferSlabSize", "64k")
                .set("spark.shuffle.rdma.maxBytesInFlight", "1m")
                // Peer connections close between the tests' jobs, so the later jobs reconnect.
                .set("spark.shuffle.rdma.connectionIdleTimeout", "1s"), metricsDir));
        totals = ShuffleReadTotals.attach(sc);
        spark = SparkSession.builder().sparkContext(sc.sc()).getOrCreate();
    }

    @AfterAll
    static void stop() {
        if (sc != null) {
            sc.stop();
        }
    }

    private static List<Integer> numbers(int n) {
        return IntStream.range(0, n).boxed().collect(Collectors.toList());
    }

    @Test
    void reduceByKeyMatchesAndReportsRemoteReads() throws Exception {
        long blocksBefore = totals.remoteBlocks();
        Map<Integer, Long> result = new TreeMap<>(sc.parallelize(numbers(100_000), 8)
                .mapToPair(i -> new Tuple2<>(i % 1000, (long) i))
                .reduceByKey(Long::sum, 6)
                .collectAsMap());
        Map<Integer, Long> expected = new TreeMap<>();
        for (int i = 0; i < 100_000; i++) {
            expected.merge(i % 1000, (long) i, Long::sum);
        }
        assertThat(result).isEqualTo(expected);
        Thread.sleep(500); // task-end events arrive asynchronously
        assertThat(totals.remoteBlocks() - blocksBefore).as("blocks read from the other executor by RDMA").isPositive();
        assertThat(totals.remoteBytes()).isPositive();
    }

    @Test
    void idlePeerConnectionsCloseAndTheNextShuffleReconnects() throws Exception {
        Map<Integer, Long> expected = new TreeMap<>();
        for (int i = 0; i < 20_000; i++) {
            expected.merge(i % 100, 1L, Long::sum);
        }
        assertThat(new TreeMap<>(countByRemainder())).isEqualTo(expected);
        Map<String, Map<String, Long>> metrics = PluginCsvMetrics.awaitPositive(metricsDir, "connections.closedIdle");
        assertThat(PluginCsvMetrics.sum(metrics, "connections.closedIdle")).as("connections closed after 1 s unused").isPositive();
        assertThat(new TreeMap<>(countByRemainder())).as("the next shuffle reads through new connections").isEqualTo(expected);
        metrics = PluginCsvMetrics.awaitPositive(metricsDir, "connections.reconnects");
        assertThat(PluginCsvMetrics.sum(metrics, "connections.reconnects")).as("reconnects counted").isPositive();
    }

    private static Map<Integer, Long> countByRemainder() {
        return sc.parallelize(numbers(20_000), 4).mapToPair(i -> new Tuple2<>(i % 100, 1L)).reduceByKey(Long::sum, 4).collectAsMap();
    }

    @Test
    void groupByKeyMatches() {
        Map<Integer, List<Integer>> result = new HashMap<>();
        sc.parallelize(numbers(20_000), 6)
                .mapToPair(i -> new Tuple2<>(i % 97, i))
                .groupByKey(5)
                .collect()
                .forEach(t -> {
                    List<Integer> values = new ArrayList<>();
                    t._2().forEach(values::add);
                    values.sort(null);
                    result.put(t._1(), values);
                });
        Map<Integer, List<Integer>> expected = numbers(20_000).stream().collect(Collectors.groupingBy(i -> i % 97));
        assertThat(result).isEqualTo(expected);
    }

    @Test
    void sortByKeyUsesRangePartitioningAndIsTotallyOrdered() {
        List<Integer> keys = numbers(50_000).stream().map(i -> (int) ((i * 7919L) % 50_021)).collect(Collectors.toList());
        List<Integer> sorted = sc.parallelize(keys, 7).mapToPair(k -> new Tuple2<>(k, "v" + k)).sortByKey(true, 5)
                .map(Tuple2::_1).collect();
        List<Integer> expected = new ArrayList<>(keys);
        expected.sort(null);
        assertThat(sorted).isEqualTo(expected);
    }

    @Test
    void joinMatches() {
        JavaPairRDD<Integer, String> left = sc.parallelize(numbers(5_000), 4).mapToPair(i -> new Tuple2<>(i % 500, "l" + i));
        JavaPairRDD<Integer, String> right = sc.parallelize(numbers(1_000), 3).mapToPair(i -> new Tuple2<>(i % 700, "r" + i));
        List<String> joined = left.join(right, 4).map(t -> t._1() + ":" + t._2()._1() + ":" + t._2()._2()).collect();
        List<String> expected = new ArrayList<>();
        for (int l = 0; l < 5_000; l++) {
            for (int r = 0; r < 1_000; r++) {
                if (l % 500 == r % 700) {
                    expected.add((l % 500) + ":l" + l + ":r" + r);
                }
            }
        }
        assertThat(joined).containsExactlyInAnyOrderElementsOf(expected);
    }

    @Test
    void heavilySkewedKeyAndBlocksLargerThanASlab() {
        // 90% of the records (several MB once serialised) go to key 0, one reduce partition: its blocks
        // are far larger than the 64 KiB slab.
        JavaRDD<Integer> data = sc.parallelize(numbers(200_000), 4);
        Map<Integer, Long> counts = new TreeMap<>(data.mapToPair(i -> new Tuple2<>(i % 10 == 0 ? i % 7 : 0, "payload-" + i))
                .groupByKey(3)
                .mapValues(values -> {
                    long n = 0;
                    for (String v : values) {
                        n += v.length() > 0 ? 1 : 0;
                    }
                    return n;
                })
                .collectAsMap());
        Map<Integer, Long> expected = new TreeMap<>();
        for (int i = 0; i < 200_000; i++) {
            expected.merge(i % 10 == 0 ? i % 7 : 0, 1L, Long::sum);
        }
        assertThat(counts).isEqualTo(expected);
    }

    @Test
    void emptyPartitionsAndEmptyMapOutputs() {
        // Two keys into 16 partitions: most reduce partitions are empty, and the empty input partitions
        // write map outputs with no data at all.
        Map<Integer, Long> result = sc.parallelize(List.of(1, 2, 3, 1, 2, 1), 8)
                .mapToPair(i -> new Tuple2<>(i == 3 ? 2 : i, 1L))
                .reduceByKey(Long::sum, 16)
                .collectAsMap();
        assertThat(result).containsExactlyInAnyOrderEntriesOf(Map.of(1, 3L, 2, 3L));
        assertThat(sc.parallelize(List.<Integer>of(), 3).mapToPair(i -> new Tuple2<>(i, i)).groupByKey(4).count()).isZero();
    }

    @Test
    void aqeCoalescingAndSkewJoinSplittingReadCorrectRanges() {
        spark.conf().set("spark.sql.adaptive.enabled", "true");
        spark.conf().set("spark.sql.adaptive.coalescePartitions.enabled", "true");
        spark.conf().set("spark.sql.adaptive.advisoryPartitionSizeInBytes", "16k");
        spark.conf().set("spark.sql.adaptive.skewJoin.enabled", "true");
        spark.conf().set("spark.sql.adaptive.skewJoin.skewedPartitionFactor", "2");
        // The aggregate after the join wants the join's partitioning; allow the split anyway.
        spark.conf().set("spark.sql.adaptive.forceOptimizeSkewedJoin", "true");
        spark.conf().set("spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes", "16k");
        spark.conf().set("spark.sql.autoBroadcastJoinThreshold", "-1");
        spark.conf().set("spark.sql.shuffle.partitions", "40");
        Dataset<Row> big = spark.range(0, 200_000, 1, 6).selectExpr("id", "CASE WHEN id % 4 = 0 THEN id % 13 ELSE 0 END AS k");
        Dataset<Row> small = spark.range(0, 2_000, 1, 2).selectExpr("id % 13 AS k", "id AS sid");
        Dataset<Row> joined = big.join(small, "k").groupBy("k").count().orderBy("k");
        List<Row> rows = joined.collectAsList();
        String plan = joined.queryExecution().executedPlan().toString();

        Map<Long, Long> expected = new TreeMap<>();
        long[] smallPerKey = new long[13];
        for (long s = 0; s < 2_000; s++) {
            smallPerKey[(int) (s % 13)]++;
        }
        for (long id = 0; id < 200_000; id++) {
            long k = id % 4 == 0 ? id % 13 : 0;
            expected.merge(k, smallPerKey[(int) k], Long::sum);
        }
        Map<Long, Long> actual = new TreeMap<>();
        rows.forEach(r -> actual.put(r.getLong(0), r.getLong(1)));
        assertThat(actual).isEqualTo(expected);
        assertThat(plan).as("AQE split the skewed partition").contains("skewed");
        assertThat(plan).as("AQE coalesced small partitions").contains("coalesced");
    }
}
