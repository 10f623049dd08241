package io.rdma4j.samples.spark;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.it.spark.LocalSparkCluster;
import org.apache.spark.SparkConf;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * A shuffle-heavy job (word-count style aggregation plus a global sort) on Spark's local-cluster with
 * two executor JVMs, reading shuffle blocks through rdma4j (tcp provider when there is no RDMA NIC).
 *
 * <p>Run: {@code ./mvnw -B -pl samples/spark-demo -am -Pdemo verify -DskipTests}. Arguments:
 * {@code <path of rdma-spark-shuffle's shaded jar> [records]}.
 */
public final class SparkShuffleSample {

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: SparkShuffleSample <rdma-spark-shuffle_2.13-*-shaded.jar>,<this sample's jar> [records]");
            System.exit(2);
        }
        String sparkJars = args[0]; // comma-separated: the shaded rdma4j jar and the job's own jar
        int records = args.length > 1 ? Integer.parseInt(args[1]) : 2_000_000;
        // local-cluster launches executors from $SPARK_HOME/jars, which LocalSparkCluster links to this JVM's class path.
        SparkConf conf = LocalSparkCluster.conf("rdma4j-spark-shuffle-sample", 2, 1024, List.of(sparkJars.split(",")))
                .set("spark.shuffle.manager", LocalSparkCluster.SHUFFLE_MANAGER)
                .set("spark.shuffle.rdma.provider", System.getProperty("rdma4j.provider", "auto"))
                // No silent detour through Spark's own block transfer: the demo shows rdma4j or fails.
                .set("spark.shuffle.rdma.fallback", "fail")
                // Both executors run on this host: Spark's default would read each other's map outputs from their
                // files, as on any host. The demo reads them through the transport, as executors on two hosts do.
                .set("spark.shuffle.readHostLocalDisk", "false");
        // Executors run on this host, so they make the same choice auto-detection makes here.
        System.out.println("[spark-demo] rdma4j provider: " + RdmaTransport.explain(
                TransportConfig.fromProperties(java.util.Map.of("p.provider", conf.get("spark.shuffle.rdma.provider")), "p.")));
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
            // Each task makes its slice of the ids: shipping millions of them from the driver makes huge tasks.
            int slices = 8;
            List<Integer> sliceIds = IntStream.range(0, slices).boxed().collect(Collectors.toList());
            long start = System.nanoTime();
            List<Tuple2<Long, Integer>> top = sc.parallelize(sliceIds, slices)
                    .flatMap(s -> IntStream.range((int) ((long) records * s / slices), (int) ((long) records * (s + 1) / slices))
                            .iterator())
                    .mapToPair(i -> new Tuple2<>("word-" + (i * 2654435761L % 50_000), 1))
                    .reduceByKey(Integer::sum, 8)
                    .mapToPair(t -> new Tuple2<>((long) t._2(), t._1().hashCode()))
                    .sortByKey(false, 8)
                    .take(5);
            long ms = (System.nanoTime() - start) / 1_000_000;
            System.out.printf("[spark-demo] %,d records through reduceByKey + sortByKey on local-cluster[2,1,1024] in %d ms; top counts %s%n",
                    records, ms, top);
        }
        System.out.printf("[spark-demo] shuffle read through rdma4j: %,d remote bytes in %d remote blocks (+%d local), fetch wait %d ms%n",
                remoteBytes.sum(), remoteBlocks.sum(), localBlocks.sum(), fetchWaitMs.sum());
        if (remoteBlocks.sum() == 0) {
            throw new IllegalStateException("no shuffle block was fetched remotely: the demo did not exercise rdma4j");
        }
        System.out.println("[spark-demo] OK");
    }
}
