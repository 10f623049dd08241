package io.rdma4j.spark;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;

/**
 * Starts Spark's local-cluster (real executor JVMs) from the test classpath: a SPARK_HOME under target/
 * whose jars/ links every classpath jar except rdma4j's own (executors get those from the shaded jar,
 * which proves it self-contained), plus a jar of the test classes for the test's closures.
 *
 * <p>Shipped in this module's test-jar for other modules' Spark tests (the soft-RDMA lab's Spark job). System
 * properties: {@code rdma4j.testClasses} (the test classes to jar for closures; its parent directory holds
 * SPARK_HOME, which the {@code SPARK_HOME} environment variable of the driver JVM must name),
 * {@code rdma4j.shadedJar}, {@code rdma4j.spark.executorWaitSeconds}.
 */
public final class LocalCluster {

    private LocalCluster() {
    }

    public static Path target() {
        return Paths.get(System.getProperty("rdma4j.testClasses", "target/test-classes")).toAbsolutePath().getParent();
    }

    /** The conf of a local-cluster[2,1,1024] app using rdma4j's shuffle on the tcp provider. */
    public static SparkConf rdmaConf(String appName) {
        return baseConf(appName)
                .set("spark.shuffle.manager", RdmaShuffleManager.class.getName())
                .set("spark.shuffle.rdma.provider", "tcp")
                .set("spark.shuffle.rdma.fallback", "fail");
    }

    public static SparkConf baseConf(String appName) {
        Path home = sparkHome();
        Path shaded = Paths.get(System.getProperty("rdma4j.shadedJar", "target/rdma-spark-shuffle-0.1.0-SNAPSHOT-shaded.jar"));
        if (!Files.isRegularFile(shaded)) {
            throw new IllegalStateException("shaded jar " + shaded + " is missing: run these tests through 'mvnw verify' (failsafe runs after package)");
        }
        String javaHome = ProcessHandle.current().info().command()
                .map(cmd -> Paths.get(cmd).getParent().getParent().toString())
                .orElse(System.getProperty("java.home"));
        String executorJavaOptions = "--enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow";
        return new SparkConf()
                .setMaster("local-cluster[2,1,1024]")
                .setAppName(appName)
                .set("spark.jars", shaded.toAbsolutePath() + "," + testClassesJar())
                .set("spark.executorEnv.JAVA_HOME", javaHome)
                .set("spark.executorEnv.SPARK_SCALA_VERSION", "2.13")
                .set("spark.executor.extraJavaOptions", executorJavaOptions)
                .set("spark.driver.host", "127.0.0.1")
                .set("spark.driver.bindAddress", "127.0.0.1")
                .set("spark.ui.enabled", "false")
                .set("spark.local.dir", target().resolve("spark-local").toString())
                .set("spark.home", home.toString());
    }

    public static JavaSparkContext start(SparkConf conf) {
        JavaSparkContext sc = new JavaSparkContext(conf);
        // Wait for both executors, so that shuffles really cross JVMs. Slow machines (the emulated CPU of the
        // soft-RDMA lab) need longer: rdma4j.spark.executorWaitSeconds.
        long waitSeconds = Long.getLong("rdma4j.spark.executorWaitSeconds", 60);
        long deadline = System.nanoTime() + waitSeconds * 1_000_000_000L;
        while (sc.sc().getExecutorMemoryStatus().size() < 3) {
            if (System.nanoTime() > deadline) {
                sc.stop();
                throw new IllegalStateException("executors did not register within " + waitSeconds + " s (raise "
                        + "rdma4j.spark.executorWaitSeconds on a slow machine); see " + sparkHome().resolve("work"));
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
        return sc;
    }

    public static synchronized Path sparkHome() {
        Path home = target().resolve("spark-home");
        Path jars = home.resolve("jars");
        try {
            Files.createDirectories(jars);
            for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
                Path jar = Paths.get(entry);
                String name = jar.getFileName().toString();
                if (!name.endsWith(".jar") || name.startsWith("rdma-") || jar.toString().contains("/io/rdma4j/")) {
                    continue;
                }
                Path link = jars.resolve(name);
                if (!Files.exists(link, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                    Files.createSymbolicLink(link, jar.toAbsolutePath());
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot prepare SPARK_HOME at " + home, e);
        }
        return home;
    }

    private static synchronized String testClassesJar() {
        Path classes = Paths.get(System.getProperty("rdma4j.testClasses", "target/test-classes")).toAbsolutePath();
        Path jar = target().resolve("rdma-spark-shuffle-test-closures.jar");
        try (OutputStream out = Files.newOutputStream(jar); JarOutputStream jarOut = new JarOutputStream(out);
             Stream<Path> files = Files.walk(classes)) {
            for (Path file : (Iterable<Path>) files.filter(Files::isRegularFile)::iterator) {
                jarOut.putNextEntry(new JarEntry(classes.relativize(file).toString().replace(File.separatorChar, '/')));
                Files.copy(file, jarOut);
                jarOut.closeEntry();
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot jar the test classes", e);
        }
        return jar.toString();
    }
}
