package io.rdma4j.testsupport.spark;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Spark's local-cluster (a master, workers and real executor JVMs on this host) from a Maven class path, without
 * a Spark distribution. {@code SPARK_HOME} is a directory whose {@code jars/} links every jar of this JVM's class
 * path except rdma4j's own: executors get those from {@code spark.jars} (the shaded jar, which proves it
 * self-contained).
 *
 * <p>Spark's workers read three variables from the environment, so the Maven plugin that starts the JVM sets them
 * (surefire, failsafe or exec; the soft-RDMA lab's guest script for the lab's Spark job): {@code SPARK_HOME} (an
 * empty or earlier prepared directory), {@code SPARK_SCALA_VERSION=2.13} and {@code SPARK_LOCAL_IP=127.0.0.1}
 * (the lab guest's host name does not resolve). {@link #conf} passes the executors the same JDK, Scala version
 * and FFM options.
 *
 * <p>Used by rdma-spark-shuffle's cluster tests, it/lab-spark, samples/spark-demo and it/bench-spark. Not shipped.
 */
public final class LocalSparkCluster {

    /** The options every executor JVM gets: FFM without warnings, and Spark's own off-heap access. */
    public static final String EXECUTOR_JAVA_OPTIONS = "--enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow";
    public static final String SCALA_VERSION = "2.13";
    public static final String SHUFFLE_MANAGER = "io.rdma4j.spark.RdmaShuffleManager";

    private static final Pattern LOCAL_CLUSTER = Pattern.compile("local-cluster\\[(\\d+),.*]");

    private LocalSparkCluster() {
    }

    /**
     * {@code $SPARK_HOME}, its {@code jars/} linking this JVM's class path (again on every call: idempotent). Fails
     * saying what to set when the variable is missing.
     */
    public static synchronized Path sparkHome() {
        String home = System.getenv("SPARK_HOME");
        if (home == null || home.isBlank()) {
            throw new IllegalStateException("SPARK_HOME is not set: set it to an empty directory (with SPARK_SCALA_VERSION="
                    + SCALA_VERSION + " and SPARK_LOCAL_IP=127.0.0.1) in the environment of this JVM; local-cluster starts"
                    + " executors from $SPARK_HOME/jars, which this class links to the class path");
        }
        Path sparkHome = Path.of(home).toAbsolutePath();
        Path jars = sparkHome.resolve("jars");
        try {
            Files.createDirectories(jars);
            for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
                Path jar = Path.of(entry).toAbsolutePath();
                String name = jar.getFileName().toString();
                if (!name.endsWith(".jar") || isRdma4j(jar)) {
                    continue;
                }
                Path link = jars.resolve(name);
                if (!Files.exists(link, LinkOption.NOFOLLOW_LINKS)) {
                    Files.createSymbolicLink(link, jar);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot prepare SPARK_HOME at " + sparkHome, e);
        }
        return sparkHome;
    }

    /** rdma4j's own jars: from the reactor ({@code rdma-*}, {@code rdma4j-*}) or from a Maven repository. */
    private static boolean isRdma4j(Path jar) {
        String name = jar.getFileName().toString();
        return name.startsWith("rdma-") || name.startsWith("rdma4j-")
                || jar.toString().contains(File.separator + "io" + File.separator + "rdma4j" + File.separator);
    }

    /**
     * The conf of a {@code local-cluster[executors,1,executorMemoryMb]} app on {@link #sparkHome()}: executors run
     * this JVM's JDK with {@link #EXECUTOR_JAVA_OPTIONS}, get {@code jars} ({@code spark.jars}), and everything
     * binds to loopback. Spark's own shuffle until the caller sets {@code spark.shuffle.manager} (see
     * {@link #SHUFFLE_MANAGER}).
     */
    public static SparkConf conf(String appName, int executors, int executorMemoryMb, List<String> jars) {
        return new SparkConf()
                .setMaster("local-cluster[" + executors + ",1," + executorMemoryMb + "]")
                .setAppName(appName)
                .set("spark.home", sparkHome().toString())
                .set("spark.jars", String.join(",", jars))
                .set("spark.executorEnv.JAVA_HOME", javaHome())
                .set("spark.executorEnv.SPARK_SCALA_VERSION", SCALA_VERSION)
                .set("spark.executor.extraJavaOptions", EXECUTOR_JAVA_OPTIONS)
                .set("spark.driver.host", "127.0.0.1")
                .set("spark.driver.bindAddress", "127.0.0.1")
                .set("spark.ui.enabled", "false");
    }

    /**
     * Starts the context and waits until every executor of the local-cluster master has registered, so that
     * shuffles really cross JVMs; an emulated CPU (the soft-RDMA lab) needs a longer {@code executorWait}. With
     * dynamic allocation it does not wait.
     */
    public static JavaSparkContext start(SparkConf conf, Duration executorWait) {
        Matcher master = LOCAL_CLUSTER.matcher(conf.get("spark.master", ""));
        if (!master.matches()) {
            throw new IllegalArgumentException("not a local-cluster master: '" + conf.get("spark.master", "") + "'");
        }
        int executors = Integer.parseInt(master.group(1));
        JavaSparkContext sc = new JavaSparkContext(conf);
        if (conf.getBoolean("spark.dynamicAllocation.enabled", false)) {
            // Executors come and go: an idle one may be removed before the last has registered. Jobs wait for them.
            return sc;
        }
        long deadline = System.nanoTime() + executorWait.toNanos();
        // The driver's block manager counts too.
        while (sc.sc().getExecutorMemoryStatus().size() < executors + 1) {
            if (System.nanoTime() > deadline) {
                sc.stop();
                throw new IllegalStateException(executors + " executors did not register within " + executorWait.toSeconds()
                        + " s (slow machine? allow longer); their logs: " + sparkHome().resolve("work"));
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                sc.stop();
                throw new IllegalStateException("interrupted while waiting for executors", e);
            }
        }
        return sc;
    }

    /** A jar of {@code classes} at {@code jar}, for {@code spark.jars}: executors load the job's closures from it. */
    public static synchronized Path jarOf(Path classes, Path jar) {
        try (OutputStream out = Files.newOutputStream(jar); JarOutputStream jarOut = new JarOutputStream(out);
             Stream<Path> files = Files.walk(classes)) {
            for (Path file : (Iterable<Path>) files.filter(Files::isRegularFile)::iterator) {
                jarOut.putNextEntry(new JarEntry(classes.relativize(file).toString().replace(File.separatorChar, '/')));
                Files.copy(file, jarOut);
                jarOut.closeEntry();
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot jar " + classes + " into " + jar, e);
        }
        return jar;
    }

    /** The JDK running this JVM (the launcher's, which a jlinked java.home may not be). */
    public static String javaHome() {
        return ProcessHandle.current().info().command()
                .map(command -> Path.of(command).getParent().getParent().toString())
                .orElse(System.getProperty("java.home"));
    }
}
