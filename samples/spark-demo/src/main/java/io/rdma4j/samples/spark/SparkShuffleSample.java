package io.rdma4j.samples.spark;

import io.rdma4j.core.ProviderSelection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.testsupport.spark.LocalSparkCluster;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import scala.Tuple2;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * A word count (an aggregation plus a global sort by count) on Spark's local-cluster with
 * two executor JVMs, reading shuffle blocks through rdma4j (tcp provider when there is no RDMA NIC).
 *
 * <p>Run: {@code ./mvnw -B -q -pl samples/spark-demo -am -Pdemo verify}. Arguments:
 * {@code <path of rdma-spark-shuffle's shaded jar> [records]}.
 */
public final class SparkShuffleSample {

    public static void main(String[] args) throws java.io.IOException {
        if (args.length < 1) {
            System.err.println("usage: SparkShuffleSample <rdma-spark-shuffle_2.13-*-shaded.jar>,<this sample's jar> [records]");
            System.exit(2);
        }
        String sparkJars = args[0]; // comma-separated: the shaded rdma4j jar and the job's own jar
        int records = args.length > 1 ? Integer.parseInt(args[1]) : 500_000;
        // local-cluster launches executors from $SPARK_HOME/jars, which LocalSparkCluster links to this JVM's class path.
        SparkConf conf = LocalSparkCluster.conf("rdma4j-spark-shuffle-sample", 2, 1024, List.of(sparkJars.split(",")))
                .set("spark.shuffle.manager", LocalSparkCluster.SHUFFLE_MANAGER)
                .set("spark.shuffle.rdma.provider", System.getProperty("rdma4j.provider", "auto"))
                // No silent detour through Spark's own block transfer: the demo shows rdma4j or fails.
                .set("spark.shuffle.rdma.fallback", "fail")
                // Both executors run on this host: Spark's default would read each other's map outputs from their
                // files, as on any host. The demo reads them through the transport, as executors on two hosts do.
                .set("spark.shuffle.readHostLocalDisk", "false")
                // The executors live for seconds: the quick compiler alone gets them going sooner.
                .set("spark.executor.extraJavaOptions", LocalSparkCluster.EXECUTOR_JAVA_OPTIONS + " -XX:TieredStopAtLevel=1");
        // Executors run on this host, so they make the same choice auto-detection makes here.
        ProviderSelection selection = RdmaTransport.explain(
                TransportConfig.fromProperties(java.util.Map.of("p.provider", conf.get("spark.shuffle.rdma.provider")), "p."));
        System.out.println("[spark-demo] rdma4j provider: " + selection);
        LongAdder remoteBytes = new LongAdder();
        LongAdder remoteBlocks = new LongAdder();
        LongAdder localBlocks = new LongAdder();
        LongAdder fetchWaitMs = new LongAdder();
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            sc.sc().addSparkListener(new SparkListener() {
                @Override
                public void onTaskEnd(SparkListenerTaskEnd end) {
                    if (end.taskMetrics() != null) {
                        var read = end.taskMetrics().shuffleReadMetrics();
                        remoteBytes.add(read.remoteBytesRead());
                        remoteBlocks.add(read.remoteBlocksFetched());
                        localBlocks.add(read.localBlocksFetched());
                        fetchWaitMs.add(read.fetchWaitTime());
                    }
                }
            });
            // Each task makes its slice of the words: shipping them from the driver makes huge tasks.
            int slices = 8;
            List<Integer> sliceIds = IntStream.range(0, slices).boxed().collect(Collectors.toList());
            long start = System.nanoTime();
            JavaPairRDD<String, Integer> counts = sc.parallelize(sliceIds, slices)
                    .flatMap(s -> IntStream.range((int) ((long) records * s / slices), (int) ((long) records * (s + 1) / slices))
                            .iterator())
                    .mapToPair(i -> new Tuple2<>(word(i), 1))
                    .reduceByKey(Integer::sum, 8);
            // Every word by count, most frequent first: 50,000 pairs, small enough to check here in full.
            List<Tuple2<Integer, String>> byCount = counts.mapToPair(Tuple2::swap).sortByKey(false, 8).collect();
            List<Tuple2<Integer, String>> top = byCount.subList(0, Math.min(3, byCount.size()));
            long distinct = byCount.size();
            long total = byCount.stream().mapToLong(Tuple2::_1).sum();
            long ms = (System.nanoTime() - start) / 1_000_000;
            System.out.printf("[spark-demo] word count on local-cluster[2,1,1024] (2 executor JVMs): %,d words, %,d distinct,"
                    + " reduceByKey + sortByKey in %,d ms%n", records, distinct, ms);
            System.out.printf("[spark-demo] most frequent: %s; counts add up to the %,d words: %s%n",
                    top.stream().map(t -> t._2() + " x" + t._1()).collect(Collectors.joining(", ")), records, total == records);
            if (total != records) {
                throw new IllegalStateException("the counts add up to " + total + ", not " + records);
            }
        }
        System.out.printf("[spark-demo] shuffle blocks of the other executor read through rdma4j: %,d bytes in %d blocks"
                + " (+%d local blocks), reducers waited %d ms for them%n",
                remoteBytes.sum(), remoteBlocks.sum(), localBlocks.sum(), fetchWaitMs.sum());
        if (remoteBlocks.sum() == 0) {
            throw new IllegalStateException("no shuffle block was fetched remotely: the demo did not exercise rdma4j");
        }
        report(selection.toString(), String.format("%,d KB of shuffle blocks, %d blocks", remoteBytes.sum() / 1000, remoteBlocks.sum()),
                "verbs".equals(selection.provider()) ? "RDMA READ" : "emulated READ (" + selection.provider() + ")",
                "OK, counts add up");
        System.out.println("[spark-demo] OK");
    }

    /** A skewed vocabulary of 50,000 words: low-numbered words are the most frequent, as in text. */
    static String word(int i) {
        double u = ((i * 2654435761L) & 0xFFFFFFFFL) / 4294967296.0;
        return "word-" + (int) (50_000 * u * u * u);
    }

    /** This demo's row of the table that {@code -Pdemo} ends with (samples/demo-summary), when run there. */
    static void report(String... columns) throws java.io.IOException {
        String file = System.getProperty("demo.result");
        if (file != null) {
            Files.writeString(Path.of(file), "spark-demo\t" + String.join("\t", columns));
        }
    }
}
