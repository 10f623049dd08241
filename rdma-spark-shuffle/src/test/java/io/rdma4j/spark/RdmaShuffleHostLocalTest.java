package io.rdma4j.spark;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Spark's default {@code spark.shuffle.readHostLocalDisk=true} on local-cluster, where both executors share the host:
 * each reads the other's map outputs from its files, as Spark's own reader does, and nothing goes through the
 * transport.
 */
class RdmaShuffleHostLocalTest {

    @Test
    void executorsOnOneHostReadEachOthersMapOutputsFromTheirFiles() throws Exception {
        Path csv = PluginCsvMetrics.emptyDirectory(LocalCluster.target().resolve("host-local-metrics"));
        SparkConf conf = PluginCsvMetrics.enable(LocalCluster.rdmaConf("rdma4j-host-local"), csv)
                .set(RdmaShuffleConf.SPARK_READ_HOST_LOCAL_DISK, "true");
        try (JavaSparkContext sc = LocalCluster.start(conf)) {
            ShuffleReadTotals totals = ShuffleReadTotals.attach(sc);
            Map<Integer, Long> sums = sc.parallelize(IntStream.range(0, 200_000).boxed().collect(Collectors.toList()), 8)
                    .mapToPair(i -> new Tuple2<>(i % 97, 1L))
                    .reduceByKey(Long::sum, 5)
                    .collectAsMap();
            assertThat(sums).hasSize(97).allSatisfy((k, v) -> assertThat(v).isEqualTo(200_000 / 97 + (k < 200_000 % 97 ? 1 : 0)));
            List<Integer> sorted = sc.parallelize(IntStream.range(0, 100_000).map(i -> (i * 7919) % 100_000).boxed()
                    .collect(Collectors.toList()), 8).mapToPair(i -> new Tuple2<>(i, i)).sortByKey(true, 6).keys().collect();
            assertThat(sorted).isEqualTo(IntStream.range(0, 100_000).boxed().toList());
            assertThat(totals.mapExecutors()).as("map outputs on both executors").hasSize(2);
            assertThat(totals.remoteBlocks()).as("blocks through the transport").isZero();
            assertThat(totals.localBlocks()).as("blocks from this or the other executor's files").isPositive();

            // The plugin's figures: blocks from the other executor's files, no READ.
            Map<String, Map<String, Long>> metrics = PluginCsvMetrics.awaitPositive(csv, "hostLocalBlocks");
            assertThat(PluginCsvMetrics.sum(metrics, "hostLocalBlocks")).as("blocks read from the other executor's files: " + metrics).isPositive();
            assertThat(metrics.values()).allSatisfy(m -> {
                assertThat(m.getOrDefault("reads", 0L)).as("RDMA READs").isZero();
                assertThat(m.getOrDefault("blocksFetched", 0L)).isZero();
            });
        }
    }
}
