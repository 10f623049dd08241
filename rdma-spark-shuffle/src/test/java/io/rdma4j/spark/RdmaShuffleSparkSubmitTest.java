package io.rdma4j.spark;

import io.rdma4j.testsupport.spark.LocalSparkCluster;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The README's Spark quick start, as a user runs it: a standalone master and a worker (child JVMs), and
 * {@code spark-submit} with exactly the README's options (read from the README) plus the job's, through Spark's
 * launcher as the {@code spark-submit} script runs it. The shuffle must go through rdma4j ({@code fallback=fail}),
 * and the plugin's metrics reach Spark's CSV sink.
 */
class RdmaShuffleSparkSubmitTest {

    private static final int EXECUTORS = 2;
    /** On a busy 2-core machine executor JVMs can take a minute to start. */
    private static final long EXECUTOR_WAIT_SECONDS = Long.getLong("rdma4j.spark.executorWaitSeconds", 120);
    private static final Pattern DRIVER_LOG = Pattern.compile(
            "rdma4j shuffle: executor (\\S+) serves map outputs at \\S+ on provider (\\w+)");

    @Test
    @Timeout(value = 420, unit = TimeUnit.SECONDS)
    void theReadmesSparkSubmitLineShufflesThroughRdmaWithMetrics() throws Exception {
        Path dir = LocalCluster.target().resolve("spark-submit-test");
        PluginCsvMetrics.emptyDirectory(dir);
        Path csv = Files.createDirectories(dir.resolve("metrics"));
        Path sparkHome = LocalCluster.sparkHome();
        Path shaded = Path.of(System.getProperty("rdma4j.shadedJar")).toAbsolutePath();
        Path appJar = LocalSparkCluster.jarOf(Path.of(System.getProperty("rdma4j.testClasses")), dir.resolve("submitted-app.jar"));

        List<String> readme = readmeSparkSubmit();
        int jars = readme.indexOf("--jars");
        // The README's path is relative to the repository root, where the user runs the build (this module's parent).
        assertThat(Path.of("..").resolve(readme.get(jars + 1)).toAbsolutePath().normalize())
                .as("the README names the shaded jar where the build makes it").isEqualTo(shaded.normalize());
        List<String> submit = new ArrayList<>(readme);
        submit.set(jars + 1, shaded.toString());

        List<Process> daemons = new ArrayList<>();
        try {
            Process master = start(dir, "master", List.of(java(), "-Xmx256m", "-cp", sparkHome.resolve("jars") + File.separator + "*",
                    "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"));
            daemons.add(master);
            String masterUrl = awaitLog(master, dir.resolve("master.log"), Pattern.compile("Starting Spark master at (spark://\\S+)"), 60);
            Process worker = start(dir, "worker", List.of(java(), "-Xmx256m", "-cp", sparkHome.resolve("jars") + File.separator + "*",
                    "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                    "--cores", String.valueOf(EXECUTORS), "--memory", "2g", "--work-dir", dir.resolve("work").toString(), masterUrl));
            daemons.add(worker); // it registers with the master while the driver starts; the app waits for its executors

            submit.addAll(0, List.of("--master", masterUrl));
            submit.addAll(List.of(
                    "--conf", "spark.shuffle.rdma.fallback=fail",
                    // Worker and executors share this host: through the transport, not each other's files.
                    "--conf", "spark.shuffle.readHostLocalDisk=false",
                    "--conf", "spark.executor.cores=1",
                    "--conf", "spark.cores.max=" + EXECUTORS,
                    "--conf", "spark.executor.memory=512m",
                    "--conf", "spark.ui.enabled=false"));
            PluginCsvMetrics.settings(csv).forEach((key, value) -> {
                if (!key.equals("spark.plugins")) { // the README's line sets it
                    submit.addAll(List.of("--conf", key + "=" + value));
                }
            });
            submit.addAll(List.of("--class", SubmittedShuffleApp.class.getName(), appJar.toString(), String.valueOf(EXECUTORS),
                    String.valueOf(EXECUTOR_WAIT_SECONDS)));
            Process driver = new ProcessBuilder(sparkSubmitCommand(dir, submit)).redirectOutput(dir.resolve("driver.out").toFile())
                    .redirectError(dir.resolve("driver.log").toFile()).start();
            daemons.add(driver);
            boolean exited = driver.waitFor(EXECUTOR_WAIT_SECONDS + 120, TimeUnit.SECONDS);
            String out = Files.readString(dir.resolve("driver.out"));
            String log = Files.readString(dir.resolve("driver.log"));
            assertThat(exited && driver.exitValue() == 0).as("spark-submit exits 0; its log:\n" + tail(log) + "\nthe worker's:\n"
                    + tail(Files.readString(dir.resolve("worker.log")))).isTrue();

            assertThat(out).as("every key counted once per 4000 numbers")
                    .contains(SubmittedShuffleApp.RESULT + "{0=4000, 1=4000, 2=4000, 3=4000, 4=4000, 5=4000, 6=4000, 7=4000, 8=4000, 9=4000}");

            Map<String, String> providers = new HashMap<>();
            Matcher m = DRIVER_LOG.matcher(log);
            while (m.find()) {
                assertThat(providers.put(m.group(1), m.group(2))).as("the driver logs executor " + m.group(1) + " once").isNull();
            }
            assertThat(providers).as("the driver logs each executor's provider").hasSize(EXECUTORS);

            // Every executor that ran the shuffle has a provider gauge at 1; together they read blocks by RDMA.
            Map<String, Map<String, Long>> metrics = PluginCsvMetrics.read(csv);
            assertThat(metrics).as("executor metrics in the CSV sink").hasSize(EXECUTORS);
            long reads = 0;
            long bytes = 0;
            long blocks = 0;
            long registered = 0;
            for (Map.Entry<String, Map<String, Long>> executor : metrics.entrySet()) {
                Map<String, Long> e = executor.getValue();
                assertThat(e.get("provider." + providers.get(executor.getKey())))
                        .as("executor " + executor.getKey() + "'s provider gauge").isEqualTo(1L);
                assertThat(e.get("fallbacks.transportUnavailable")).isZero();
                assertThat(e.get("fallbacks.peerUnreachable")).isZero();
                assertThat(e).as("executor " + executor.getKey() + "'s transport gauges")
                        .containsKeys("connections", "bufferedBytes", "messageBufferBytes", "receiveCreditsLent");
                assertThat(e.get("bufferedBytes")).isNotNegative();
                assertThat(e.get("registrationTime")).as("one registration timed per map output registered")
                        .isEqualTo(e.get("mapOutputsRegistered"));
                reads += e.get("reads");
                bytes += e.get("bytesRead");
                blocks += e.get("blocksFetched");
                registered += e.get("mapOutputsRegistered");
            }
            assertThat(reads).as("RDMA READs").isPositive();
            assertThat(bytes).as("bytes read by RDMA").isGreaterThanOrEqualTo(reads);
            assertThat(blocks).as("blocks fetched by RDMA").isPositive();
            assertThat(registered).as("map outputs registered for peers").isPositive();
        } finally {
            for (Process p : daemons.reversed()) {
                p.destroy(); // the worker's shutdown stops its executors
                if (!p.waitFor(20, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                }
            }
        }
    }

    /** The arguments of the README's {@code spark-submit} line (its trailing {@code ...} left out). */
    private static List<String> readmeSparkSubmit() throws IOException {
        Path readme = LocalCluster.target().getParent().getParent().resolve("README.md");
        String text = Files.readString(readme);
        Matcher block = Pattern.compile("```bash\\n(spark-submit [^`]*)```").matcher(text);
        assertThat(block.find()).as("a spark-submit block in " + readme).isTrue();
        List<String> args = new ArrayList<>(List.of(block.group(1).replace("\\\n", " ").trim().split("\\s+")));
        assertThat(args.getFirst()).isEqualTo("spark-submit");
        args.removeFirst();
        if (args.getLast().equals("...")) {
            args.removeLast();
        }
        assertThat(args).contains("spark.shuffle.manager=" + RdmaShuffleManager.class.getName(),
                "spark.plugins=" + RdmaShufflePlugin.class.getName());
        return args;
    }

    /** What the {@code spark-submit} script runs: Spark's launcher builds the driver's command from the arguments. */
    private static List<String> sparkSubmitCommand(Path dir, List<String> args) throws Exception {
        String launcherJar = Stream.of(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(p -> Path.of(p).getFileName().toString().startsWith("spark-launcher_")).findFirst().orElseThrow();
        List<String> command = new ArrayList<>(List.of(java(), "-cp", launcherJar, "org.apache.spark.launcher.Main",
                "org.apache.spark.deploy.SparkSubmit"));
        command.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(command);
        pb.environment().put("JAVA_HOME", LocalSparkCluster.javaHome());
        Process launcher = pb.redirectError(dir.resolve("launcher.log").toFile()).start();
        String output = new String(launcher.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(launcher.waitFor()).as("Spark's launcher: " + Files.readString(dir.resolve("launcher.log"))).isZero();
        // NUL-separated arguments, as bin/spark-class reads them (the first one after a line break)
        List<String> built = new ArrayList<>(Stream.of(output.split("\0")).map(String::strip).filter(a -> !a.isEmpty()).toList());
        assertThat(built).as("the driver's command").contains("--enable-native-access=ALL-UNNAMED");
        return built;
    }

    private static Process start(Path dir, String name, List<String> command) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(dir.resolve(name + ".log").toFile());
        pb.environment().put("JAVA_HOME", LocalSparkCluster.javaHome());
        return pb.start();
    }

    /** Waits for {@code pattern} in the daemon's log; its first group. */
    private static String awaitLog(Process process, Path log, Pattern pattern, int seconds) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            String text = Files.exists(log) ? Files.readString(log) : "";
            Matcher m = pattern.matcher(text);
            if (m.find()) {
                return m.group(1);
            }
            if (!process.isAlive() || System.nanoTime() > deadline) {
                throw new AssertionError((process.isAlive() ? "no '" + pattern + "' within " + seconds + " s" : "exited")
                        + " in " + log + ":\n" + tail(text));
            }
            Thread.sleep(100);
        }
    }

    private static String java() {
        return Path.of(LocalSparkCluster.javaHome(), "bin", "java").toString();
    }

    private static String tail(String text) {
        return text.length() <= 6000 ? text : text.substring(text.length() - 6000);
    }
}
