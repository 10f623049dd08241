package io.rdma4j.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.testsupport.kafka.KafkaBrokerProcess;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The runnable exporter jar, started as the README says ({@code java --enable-native-access=ALL-UNNAMED -jar
 * rdma-kafka-transport-<version>-exporter.jar key=value ...}) in a child JVM next to a real broker, serves an RDMA
 * consumer, logs through its bundled SLF4J binding, and stops cleanly on SIGTERM. Runs after packaging (failsafe).
 */
class ExporterJarIT {

    private static final String SECRET = "the exporter jar test's secret";

    private static final String TOPIC = "exporter-jar";
    private static final int RECORDS = 1000;

    @Test
    void exporterJarServesRdmaConsumersAndLogs() throws Exception {
        Path jar = Path.of(System.getProperty("rdma4j.exporterJar", "(rdma4j.exporterJar not set)"));
        assertThat(jar).as("the exporter jar, built by the package phase").isRegularFile();
        Path log = Path.of("target", "exporter-process", "exporter.log").toAbsolutePath();
        Files.createDirectories(log.getParent());
        Files.deleteIfExists(log);
        try (KafkaTestCluster cluster = new KafkaTestCluster()) {
            int port = KafkaBrokerProcess.freePort();
            Process exporter = new ProcessBuilder(
                    ProcessHandle.current().info().command().orElseThrow(), "--enable-native-access=ALL-UNNAMED",
                    "-jar", jar.toAbsolutePath().toString(),
                    "rdma.exporter.log.dirs=" + cluster.logDirs(),
                    "rdma.exporter.bootstrap.servers=" + cluster.bootstrap(),
                    "rdma.exporter.listen.address=127.0.0.1:" + port,
                    "rdma.exporter.watermark.interval.ms=20",
                    "rdma.provider=tcp",
                    "rdma.shared-secret=" + SECRET) // as the README's command: consumers prove the secret
                    .redirectErrorStream(true).redirectOutput(log.toFile()).start();
            try {
                awaitListening(exporter, port, log);
                // After the start, as in production: the exporter follows a live log.
                KafkaFixtures.createTopic(cluster.bootstrap(), TOPIC, 2);
                KafkaFixtures.produceKeyed(cluster.bootstrap(), TOPIC, RECORDS);
                // A new consumer waits for its exporter connection: every record is RDMA's.
                Map<String, Object> props = KafkaFixtures.waitingForRdma(Map.of("bootstrap.servers", cluster.bootstrap(),
                        "enable.auto.commit", "false",
                        "rdma.fetch.enabled", "true",
                        "rdma.exporter.address", "127.0.0.1:" + port,
                        "rdma.provider", "tcp",
                        "rdma.shared-secret", SECRET));
                awaitExported(props, log);
                try (Consumer<String, String> consumer = RdmaConsumerFactory.create(props, new StringDeserializer(), new StringDeserializer())) {
                    List<TopicPartition> partitions = List.of(new TopicPartition(TOPIC, 0), new TopicPartition(TOPIC, 1));
                    consumer.assign(partitions);
                    consumer.seekToBeginning(partitions);
                    List<String> values = new ArrayList<>();
                    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                    while (values.size() < RECORDS && System.nanoTime() < deadline) {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            values.add(r.value());
                        }
                    }
                    assertThat(values).as("records read through the exporter jar\n%s", tail(log))
                            .containsExactlyInAnyOrderElementsOf(java.util.stream.IntStream.range(0, RECORDS).mapToObj(i -> "value-" + i).toList());
                    RdmaKafkaConsumer<String, String> rdma = (RdmaKafkaConsumer<String, String>) consumer;
                    assertThat(rdma.transportMetrics().snapshot(OperationType.READ).count()).as("RDMA READs").isPositive();
                    assertThat(KafkaFixtures.rdmaRecords(rdma)).as("records that came by RDMA READ from the exporter jar").isEqualTo(RECORDS);
                }
                exporter.destroy(); // SIGTERM, as a service manager stops it
                assertThat(exporter.waitFor(30, TimeUnit.SECONDS)).as("the exporter stops on SIGTERM\n%s", tail(log)).isTrue();
            } finally {
                exporter.destroyForcibly();
                exporter.waitFor(30, TimeUnit.SECONDS);
            }
            String output = Files.readString(log, StandardCharsets.UTF_8);
            assertThat(output).as("the exporter logs through the bundled slf4j-simple binding")
                    .contains("INFO LogExporter - rdma4j log exporter on /127.0.0.1:" + port)
                    .as("rdma-core's System.Logger goes to the same binding")
                    .contains("INFO RdmaTransport - rdma4j transport on provider tcp")
                    .doesNotContain("No SLF4J providers")
                    .doesNotContain("WARN")
                    .as("native access is enabled: no FFM warning")
                    .doesNotContain("restricted method");
        }
    }

    /** A busy port or an option the jar does not take: exit status 2 and one line that says what to do, no stack trace. */
    @Test
    void exporterJarThatCannotStartSaysWhyInOneLine() throws Exception {
        Path dirs = Files.createTempDirectory("exporter-jar-dirs");
        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            List<String> common = List.of("rdma.exporter.log.dirs=" + dirs, "rdma.exporter.bootstrap.servers=127.0.0.1:1",
                    "rdma.exporter.acls=false", "rdma.provider=tcp");
            assertOneLineAndStatus2(common, List.of("rdma.exporter.listen.address=127.0.0.1:" + taken.getLocalPort()),
                    "rdma4j log exporter not started: cannot listen on /127.0.0.1:" + taken.getLocalPort());
            assertOneLineAndStatus2(common, List.of("--port=9299"), "rdma4j log exporter not started: unknown option --port=9299");
            assertOneLineAndStatus2(common, List.of("rdma.exporter.listen.adress=127.0.0.1:9299"),
                    "rdma4j log exporter not started: unknown key rdma.exporter.listen.adress");
        }
    }

    /** On a java older than 25 (the machines' default OpenJDK 17, or RDMA4J_OLD_JAVA): one line naming the JDK to use. */
    @Test
    void exporterJarOnAnOlderJavaSaysWhichJdkToUse() throws Exception {
        Path oldJava = Path.of(System.getenv().getOrDefault("RDMA4J_OLD_JAVA", "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"));
        assertThat(oldJava).as("a java older than 25 to run the jar with: install OpenJDK 17 (the machines' default java,"
                + " e.g. apt-get install openjdk-17-jdk-headless) or set RDMA4J_OLD_JAVA to one").isExecutable();
        Path jar = Path.of(System.getProperty("rdma4j.exporterJar", "(rdma4j.exporterJar not set)"));
        Process p = new ProcessBuilder(oldJava.toString(), "-jar", jar.toAbsolutePath().toString()).redirectErrorStream(true).start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(output.lines().toList()).as(output).singleElement().asString()
                .startsWith("rdma4j Kafka exporter needs Java 25 or later; this is Java ").contains("Run it with a JDK 25 java");
        assertThat(p.exitValue()).isNotZero();
    }

    private static void assertOneLineAndStatus2(List<String> common, List<String> more, String expected) throws Exception {
        Path jar = Path.of(System.getProperty("rdma4j.exporterJar", "(rdma4j.exporterJar not set)"));
        List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow(),
                "--enable-native-access=ALL-UNNAMED", "-jar", jar.toAbsolutePath().toString()));
        command.addAll(common);
        command.addAll(more);
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        // The transport's own INFO line may come first; what the user must read is the last line, and it is alone.
        List<String> lines = output.lines().filter(l -> !l.contains(" INFO ")).toList();
        assertThat(lines).as("output of %s:%n%s", more, output).hasSize(1);
        assertThat(lines.getFirst()).startsWith(expected);
        assertThat(output).doesNotContain("Exception").doesNotContain("\tat ");
        assertThat(p.exitValue()).as("exit status").isEqualTo(2);
    }

    /**
     * Waits until the exporter serves every partition of the new topic (it finds new partitions on its next refresh):
     * until a probe consumer reads every record by RDMA READ. A consumer that asks earlier falls back to the normal
     * fetch for a while for the partitions not yet exported.
     */
    private static void awaitExported(Map<String, Object> props, Path log) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            try (Consumer<String, String> probe = RdmaConsumerFactory.create(props, new StringDeserializer(), new StringDeserializer())) {
                List<TopicPartition> partitions = List.of(new TopicPartition(TOPIC, 0), new TopicPartition(TOPIC, 1));
                probe.assign(partitions);
                probe.seekToBeginning(partitions);
                int read = 0;
                long probeEnd = System.nanoTime() + Duration.ofSeconds(5).toNanos();
                while (read < RECORDS && System.nanoTime() < probeEnd) {
                    read += probe.poll(Duration.ofMillis(200)).count();
                }
                if (read == RECORDS && KafkaFixtures.rdmaRecords(probe) == RECORDS) {
                    return;
                }
            }
            assertThat(System.nanoTime()).as("the exporter serves every partition within 60 s\n%s", tail(log)).isLessThan(deadline);
            Thread.sleep(100);
        }
    }

    /** Waits for the line the exporter prints once it listens (probing the port would log a rejected peer). */
    private static void awaitListening(Process exporter, int port, Path log) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!(Files.exists(log) && Files.readString(log, StandardCharsets.UTF_8)
                .contains("rdma4j log exporter listening on /127.0.0.1:" + port))) {
            assertThat(exporter.isAlive()).as("the exporter process is running\n%s", tail(log)).isTrue();
            assertThat(System.nanoTime()).as("the exporter listens within 60 s\n%s", tail(log)).isLessThan(deadline);
            Thread.sleep(100);
        }
    }

    private static String tail(Path log) {
        try {
            List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
            return "--- " + log + " ---\n" + String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
        } catch (IOException e) {
            return "(no exporter output at " + log + ")";
        }
    }

}
