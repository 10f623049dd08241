package io.rdma4j.spark;

import org.apache.spark.FetchFailed;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/** Executor death and corrupted shuffle files, on two real executor JVMs. */
class RdmaShuffleFaultTest {

    private static JavaSparkContext sc;
    private static final List<String> fetchFailures = new CopyOnWriteArrayList<>();
    private static final AtomicInteger executorsRemoved = new AtomicInteger();

    @BeforeAll
    static void start() {
        sc = LocalCluster.start(LocalCluster.rdmaConf("rdma4j-shuffle-faults"));
        sc.sc().addSparkListener(new SparkListener() {
            @Override
            public void onTaskEnd(SparkListenerTaskEnd end) {
                if (end.reason() instanceof FetchFailed f) {
                    fetchFailures.add(f.message());
                }
            }

            @Override
            public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
                executorsRemoved.incrementAndGet();
            }
        });
    }

    @AfterAll
    static void stop() {
        if (sc != null) {
            sc.stop();
        }
    }

    private static Map<Integer, Long> expectedSums(int n, int keys) {
        Map<Integer, Long> expected = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            expected.merge(i % keys, (long) i, Long::sum);
        }
        return expected;
    }

    private static JavaPairRDD<Integer, Long> sums(int n, int keys) {
        return sc.parallelize(IntStream.range(0, n).boxed().collect(Collectors.toList()), 8)
                .mapToPair(i -> new Tuple2<>(i % keys, (long) i))
                .reduceByKey(Long::sum, 8);
    }

    @Test
    void corruptedRemoteBlockIsDetectedAndTheMapStageReRuns() throws IOException {
        JavaPairRDD<Integer, Long> reduced = sums(80_000, 500);
        assertThat(reduced.count()).isEqualTo(500); // map outputs now on disk
        int shuffleId = ((ShuffleDependency<?, ?, ?>) reduced.rdd().dependencies().head()).shuffleId();
        int corrupted = 0;
        try (Stream<Path> files = Files.walk(LocalCluster.target().resolve("spark-local"))) {
            for (Path data : files.filter(p -> p.getFileName().toString().matches("shuffle_" + shuffleId + "_\\d+_0\\.data")).toList()) {
                try (RandomAccessFile file = new RandomAccessFile(data.toFile(), "rw")) {
                    if (file.length() > 16) {
                        long at = file.length() / 2;
                        file.seek(at);
                        int b = file.read();
                        file.seek(at);
                        file.write(b ^ 0xFF); // in place: the executors' mappings see it
                        corrupted++;
                    }
                }
            }
        }
        assertThat(corrupted).as("shuffle data files corrupted").isPositive();
        fetchFailures.clear();

        Map<Integer, Long> result = new TreeMap<>(reduced.collectAsMap());

        assertThat(result).isEqualTo(expectedSums(80_000, 500));
        assertThat(fetchFailures).as("corruption reported as FetchFailed")
                .anySatisfy(m -> assertThat(m).contains("is corrupted").contains("checksum"));
    }

    @Test
    void executorKilledMidReduceIsRecoveredFrom() throws IOException {
        File marker = LocalCluster.target().resolve("kill-marker-" + System.nanoTime()).toFile();
        String markerPath = marker.getAbsolutePath();
        int removedBefore = executorsRemoved.get();
        List<Tuple2<Integer, Long>> rows = sums(100_000, 1000)
                .mapPartitionsWithIndex((index, records) -> {
                    // The first attempt of reduce task 3 kills its executor JVM after reading its blocks.
                    if (index == 3 && new File(markerPath).createNewFile()) {
                        while (records.hasNext()) {
                            records.next();
                        }
                        Runtime.getRuntime().halt(1);
                    }
                    return records;
                }, false)
                .collect();
        Map<Integer, Long> result = new TreeMap<>();
        rows.forEach(t -> result.put(t._1(), t._2()));
        assertThat(result).isEqualTo(expectedSums(100_000, 1000));
        assertThat(marker).exists();
        assertThat(executorsRemoved.get() - removedBefore).as("an executor JVM died").isPositive();
    }
}
