package io.rdma4j.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.exporter.BrokerExporterReporter;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.testsupport.kafka.KafkaBrokerProcess;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The exporter running inside a real broker process as a metrics reporter serves RDMA consumers. The broker's class
 * path is what a Kafka installation has (the broker's jars, the Kafka clients, SLF4J) plus the one jar the README
 * names, {@code rdma-kafka-transport-<version>-broker-plugin.jar}: nothing else of rdma4j, so a missing class in
 * that jar fails here. Runs after packaging (failsafe), since it needs that jar.
 */
class BrokerExporterPluginIT {

    @Test
    void brokerPluginExportsTheLogToRdmaConsumers(@TempDir Path dir) throws Exception {
        String topic = "plugin-topic";
        try (KafkaBrokerProcess broker = startWithPlugin(dir, "broker-plugin")) {
            // The plugin took its port from the broker's advertised listener.
            int port = ExporterConfig.parseAddress(broker.bootstrapServers()).getPort() + PORT_OFFSET;
            // The exporter starts once the broker listens, a moment after the broker answers.
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            boolean listening;
            while (!(listening = accepts(port)) && System.nanoTime() < deadline) {
                Thread.sleep(100);
            }
            assertThat(listening).as("the broker started the exporter on its port\n%s", broker.logTail()).isTrue();
            String bootstrap = broker.bootstrapServers();
            createTopic(bootstrap, topic);
            produce(bootstrap, topic, 0, 2000);
            Map<String, Object> consumer = new HashMap<>(Map.of("bootstrap.servers", bootstrap,
                    "key.deserializer", StringDeserializer.class, "value.deserializer", StringDeserializer.class,
                    "enable.auto.commit", "false"));
            List<KafkaFixtures.Seen> plain = readAll(new KafkaConsumer<>(consumer), topic);
            consumer.put("rdma.fetch.enabled", "true");
            consumer.put("rdma.exporter.port.offset", Integer.toString(PORT_OFFSET)); // the broker's port plus the offset
            consumer.put("rdma.provider", "tcp");
            // The consumer waits for its exporter connection: every record is RDMA's.
            try (Consumer<String, String> c = RdmaConsumerFactory.create(KafkaFixtures.waitingForRdma(consumer), null, null)) {
                assertThat(readAll(c, topic)).as("records by RDMA\n%s", broker.logTail()).isEqualTo(plain).hasSize(2000);
                RdmaKafkaConsumer<String, String> rdma = (RdmaKafkaConsumer<String, String>) c;
                assertThat(rdma.transportMetrics().snapshot(OperationType.READ).count()).as("RDMA READs\n%s", broker.logTail()).isPositive();
                assertThat(KafkaFixtures.rdmaRecords(rdma)).as("records that came by RDMA\n%s", broker.logTail()).isEqualTo(2000);
            }
            assertThat(broker.output()).as("the exporter's Admin client started after the broker listened: no refused connection")
                    .doesNotContain("could not be established");
            broker.stopGracefully();
            assertThat(accepts(port)).as("the exporter stopped with the broker\n%s", broker.logTail()).isFalse();
            assertThat(broker.output()).as("the broker ran one exporter (combined mode has two roles) and closed it")
                    .containsOnlyOnce("rdma4j log exporter started in the broker on")
                    .containsOnlyOnce("rdma4j log exporter in the broker stopped");
        }
    }

    /**
     * Where the exporter listens: the broker's port plus this. Brokers take a free port when they start, so one above it
     * is free too but for a rare coincidence.
     */
    private static final int PORT_OFFSET = 1;

    /**
     * A real broker process configured as a user would, with the exporter as its metrics reporter on the broker's port
     * plus {@link #PORT_OFFSET}: the plugin learns log.dirs, its Admin bootstrap and its port from the broker's own
     * server.properties.
     */
    private static KafkaBrokerProcess startWithPlugin(Path dir, String name) throws Exception {
        return KafkaBrokerProcess.start(dir, name, Map.of(
                "metric.reporters", BrokerExporterReporter.class.getName(),
                "rdma.exporter.port.offset", Integer.toString(PORT_OFFSET),
                "rdma.exporter.watermark.interval.ms", "20",
                "rdma.provider", "tcp"), brokerClassPathWithPluginJar());
    }

    /** Two partitions, with leaders. */
    private static void createTopic(String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            KafkaFixtures.awaitLeaders(admin, Map.of(new TopicPartition(topic, 0), OffsetSpec.latest(),
                    new TopicPartition(topic, 1), OffsetSpec.latest()));
        }
    }

    private static void produce(String bootstrap, String topic, int from, int count) throws Exception {
        Map<String, Object> producer = Map.of("bootstrap.servers", bootstrap,
                "key.serializer", StringSerializer.class, "value.serializer", StringSerializer.class);
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producer)) {
            for (int i = from; i < from + count; i++) {
                acks.add(p.send(new ProducerRecord<>(topic, "k" + i, KafkaFixtures.value(i, 300))));
            }
        }
        for (Future<RecordMetadata> ack : acks) {
            ack.get();
        }
    }

    @Test
    void controllerOnlyNodeDoesNotExportAndUnknownAddressIsExplained() {
        BrokerExporterReporter controllerOnly = new BrokerExporterReporter();
        controllerOnly.configure(Map.of("process.roles", "controller", "log.dirs", "/nonexistent-controller-dir"));
        assertThat(BrokerExporterReporter.running("/nonexistent-controller-dir")).isNull();
        controllerOnly.close();
        assertThatThrownBy(() -> new BrokerExporterReporter().configure(Map.of("process.roles", "broker",
                "log.dirs", "/tmp/x", "listeners", "PLAINTEXT://:0")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("rdma.exporter.bootstrap.servers");
    }

    /**
     * This JVM's class path (the broker kit's jars, the Kafka clients, SLF4J) without any entry that holds rdma4j
     * classes (this module's jar and test classes, rdma-core, rdma-native-loader), plus the broker-plugin jar.
     */
    static String brokerClassPathWithPluginJar() throws IOException {
        Path plugin = Path.of(System.getProperty("rdma4j.brokerPluginJar", "(rdma4j.brokerPluginJar not set)"));
        assertThat(plugin).as("the broker-plugin jar, built by the package phase").isRegularFile();
        List<String> entries = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
            if (!holdsRdma4jClasses(Path.of(entry))) {
                entries.add(entry);
            }
        }
        entries.add(plugin.toAbsolutePath().toString());
        return String.join(java.io.File.pathSeparator, entries);
    }

    private static boolean holdsRdma4jClasses(Path entry) throws IOException {
        if (java.nio.file.Files.isDirectory(entry)) {
            return java.nio.file.Files.isDirectory(entry.resolve("io/rdma4j"));
        }
        if (!java.nio.file.Files.isRegularFile(entry)) {
            return false;
        }
        try (java.util.jar.JarFile jar = new java.util.jar.JarFile(entry.toFile())) {
            return jar.getEntry("io/rdma4j/") != null
                    || jar.stream().anyMatch(e -> e.getName().startsWith("io/rdma4j/"));
        }
    }

    /** Whether something listens on the loopback port: the exporter, in the broker's JVM. */
    private static boolean accepts(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 2000);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static List<KafkaFixtures.Seen> readAll(Consumer<String, String> c, String topic) {
        return readAll(c, topic, 2000);
    }

    private static List<KafkaFixtures.Seen> readAll(Consumer<String, String> c, String topic, int count) {
        try (c) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            c.assign(tps);
            c.seekToBeginning(tps);
            List<KafkaFixtures.Seen> all = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (all.size() < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    all.add(KafkaFixtures.Seen.of(r));
                }
            }
            all.sort(java.util.Comparator.comparing(KafkaFixtures.Seen::partition)); // stable: keeps per-partition order
            return all;
        }
    }
}
