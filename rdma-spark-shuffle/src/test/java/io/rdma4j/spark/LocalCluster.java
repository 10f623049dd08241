package io.rdma4j.spark;

import io.rdma4j.testsupport.spark.LocalSparkCluster;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * This module's cluster tests on {@link LocalSparkCluster}: local-cluster[2,1,1024] with the shaded jar and a jar of
 * the test classes (for the tests' closures) in {@code spark.jars}.
 *
 * <p>Shipped in this module's test-jar for the soft-RDMA lab's Spark job. System properties: {@code rdma4j.testClasses}
 * (the test classes; their parent directory holds the Spark local dir), {@code rdma4j.shadedJar},
 * {@code rdma4j.spark.executorWaitSeconds}.
 */
public final class LocalCluster {

    private LocalCluster() {
    }

    public static Path target() {
        return testClasses().getParent();
    }

    /**
     * The conf of a local-cluster[2,1,1024] app using rdma4j's shuffle on the tcp provider. Both executors run on this
     * host, so with Spark's default each would read the other's map outputs from its files: host-local reads are off
     * here, and the executors read each other's blocks through the transport ({@code RdmaShuffleHostLocalTest} turns
     * them on).
     */
    public static SparkConf rdmaConf(String appName) {
        return baseConf(appName)
                .set("spark.shuffle.manager", RdmaShuffleManager.class.getName())
                .set("spark.shuffle.rdma.provider", "tcp")
                .set("spark.shuffle.rdma.fallback", "fail")
                .set(RdmaShuffleConf.SPARK_READ_HOST_LOCAL_DISK, "false");
    }

    public static SparkConf baseConf(String appName) {
        Path shaded = Path.of(System.getProperty("rdma4j.shadedJar", "target/rdma-spark-shuffle_2.13-0.1.0-SNAPSHOT-shaded.jar"));
        if (!Files.isRegularFile(shaded)) {
            throw new IllegalStateException("shaded jar " + shaded + " is missing: run these tests through 'mvnw verify' (failsafe runs after package)");
        }
        Path closures = LocalSparkCluster.jarOf(testClasses(), target().resolve("rdma-spark-shuffle-test-closures.jar"));
        return LocalSparkCluster.conf(appName, 2, 1024, List.of(shaded.toAbsolutePath().toString(), closures.toString()))
                .set("spark.local.dir", target().resolve("spark-local").toString());
    }

    /** Starts the app and waits for both executors ({@code rdma4j.spark.executorWaitSeconds}, default 60). */
    public static JavaSparkContext start(SparkConf conf) {
        return LocalSparkCluster.start(conf, Duration.ofSeconds(Long.getLong("rdma4j.spark.executorWaitSeconds", 60)));
    }

    public static Path sparkHome() {
        return LocalSparkCluster.sparkHome();
    }

    private static Path testClasses() {
        return Path.of(System.getProperty("rdma4j.testClasses", "target/test-classes")).toAbsolutePath();
    }
}
