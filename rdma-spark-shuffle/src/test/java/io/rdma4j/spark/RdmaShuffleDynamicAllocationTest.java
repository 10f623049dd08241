package io.rdma4j.spark;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Dynamic allocation with shuffle tracking (what rdma4j's shuffle requires of it): idle executors are removed,
 * and the executors Spark adds later serve and read shuffles through rdma4j, found through the driver's
 * registry like the first ones.
 */
class RdmaShuffleDynamicAllocationTest {

    private final Set<String> removedExecutors = ConcurrentHashMap.newKeySet();

    @Test
    void executorsAddedAfterIdleOnesWereRemovedShuffleThroughRdma4j() throws InterruptedException {
        SparkConf conf = LocalCluster.rdmaConf("rdma4j-shuffle-dynamic-allocation")
                .set("spark.dynamicAllocation.enabled", "true")
                .set("spark.dynamicAllocation.shuffleTracking.enabled", "true")
                .set("spark.dynamicAllocation.shuffleTracking.timeout", "1s")
                .set("spark.dynamicAllocation.executorIdleTimeout", "1s")
                .set("spark.dynamicAllocation.minExecutors", "0")
                .set("spark.dynamicAllocation.initialExecutors", "2")
                .set("spark.dynamicAllocation.maxExecutors", "2");
        try (JavaSparkContext sc = LocalCluster.start(conf)) {
            ShuffleReadTotals totals = ShuffleReadTotals.attach(sc);
            sc.sc().addSparkListener(new SparkListener() {
                @Override
                public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
                    removedExecutors.add(removed.executorId());
                }
            });
            assertThat(sums(sc, 1)).isEqualTo(expectedSums(1));
            Set<String> firstExecutors = totals.mapExecutors();

            // Idle, and past the shuffle tracking timeout: Spark removes both executors.
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (sc.sc().getExecutorMemoryStatus().size() > 1 && System.nanoTime() < deadline) {
                Thread.sleep(200);
            }
            assertThat(sc.sc().getExecutorMemoryStatus().size()).as("only the driver left").isEqualTo(1);
            assertThat(removedExecutors).containsAll(firstExecutors);

            totals.reset();
            // Slow map tasks, so that both new executors are up and write map outputs (fallback=fail: every
            // remote block below went through rdma4j).
            assertThat(sums(sc, 3)).isEqualTo(expectedSums(3));
            assertThat(totals.mapExecutors()).as("map outputs written by executors added after the first were removed")
                    .hasSize(2).doesNotContainAnyElementsOf(firstExecutors);
            assertThat(totals.remoteBlocks()).as("remote blocks read by the new executors").isPositive();
        }
    }

    private static final int RECORDS = 40_000;
    private static final int KEYS = 300;

    private static Map<Integer, Long> sums(JavaSparkContext sc, int factor) {
        return new TreeMap<>(sc.parallelize(IntStream.range(0, RECORDS).boxed().collect(Collectors.toList()), 8)
                .mapPartitions(it -> {
                    Thread.sleep(factor == 1 ? 0 : 2_000);
                    return it;
                })
                .mapToPair(i -> new Tuple2<>(i % KEYS, (long) i * factor))
                .reduceByKey(Long::sum, 6)
                .collectAsMap());
    }

    private static Map<Integer, Long> expectedSums(int factor) {
        Map<Integer, Long> expected = new TreeMap<>();
        for (int i = 0; i < RECORDS; i++) {
            expected.merge(i % KEYS, (long) i * factor, Long::sum);
        }
        return expected;
    }
}
