package io.rdma4j.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.exporter.BrokerExporterReporter;
import io.rdma4j.kafka.exporter.LogExporter;
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

import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The exporter running inside the broker JVM as a metrics reporter serves RDMA consumers. */
class BrokerExporterReporterTest {

    @Test
    void brokerPluginExportsTheLogToRdmaConsumers() throws Exception {
        int port = freePort();
        int brokerPort = freePort();
        String topic = "plugin-topic";
        String logDirs;
        try (KafkaTestCluster cluster = new KafkaTestCluster(Map.of(
                "metric.reporters", BrokerExporterReporter.class.getName(),
                // The kit's default listeners end in :0 (it binds them itself), from which the plugin cannot learn the
                // broker's address for its Admin client; a real broker's listeners name their ports, as here.
                "listeners", "EXTERNAL://127.0.0.1:" + brokerPort + ",CONTROLLER://localhost:0",
                "rdma.exporter.listen.address", "127.0.0.1:" + port,
                "rdma.exporter.watermark.interval.ms", "20",
                "rdma.provider", "tcp"))) {
            logDirs = cluster.logDirs();
            String bootstrap = "127.0.0.1:" + brokerPort; // the kit's bootstrapServers() names the port it would have bound
            LogExporter inBroker = BrokerExporterReporter.running(logDirs);
            assertThat(inBroker).as("the broker started the exporter (once, though combined mode has two roles)").isNotNull();
            assertThat(inBroker.address().getPort()).isEqualTo(port);
            try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
                RdmaKafkaConsumerTest.awaitLeaders(admin, Map.of(new TopicPartition(topic, 0), OffsetSpec.latest(),
                        new TopicPartition(topic, 1), OffsetSpec.latest()));
            }
            Map<String, Object> producer = Map.of("bootstrap.servers", bootstrap,
                    "key.serializer", StringSerializer.class, "value.serializer", StringSerializer.class);
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            try (KafkaProducer<String, String> p = new KafkaProducer<>(producer)) {
                for (int i = 0; i < 2000; i++) {
                    acks.add(p.send(new ProducerRecord<>(topic, "k" + i, RdmaKafkaConsumerTest.value(i, 300))));
                }
            }
            for (Future<RecordMetadata> ack : acks) {
                ack.get();
            }
            Map<String, Object> consumer = new HashMap<>(Map.of("bootstrap.servers", bootstrap,
                    "key.deserializer", StringDeserializer.class, "value.deserializer", StringDeserializer.class,
                    "enable.auto.commit", "false"));
            List<RdmaKafkaConsumerTest.Seen> plain = readAll(new KafkaConsumer<>(consumer), topic);
            consumer.put("rdma.fetch.enabled", "true");
            consumer.put("rdma.exporter.address", "127.0.0.1:" + port);
            consumer.put("rdma.provider", "tcp");
            try (Consumer<String, String> c = RdmaConsumerFactory.create(consumer, null, null)) {
                assertThat(readAll(c, topic)).isEqualTo(plain).hasSize(2000);
                RdmaKafkaConsumer<String, String> rdma = (RdmaKafkaConsumer<String, String>) c;
                assertThat(rdma.transportMetrics().snapshot(OperationType.READ).count()).as("RDMA READs").isPositive();
                assertThat(rdma.rdmaRecords()).as("records that came by RDMA").isEqualTo(2000);
            }
        }
        assertThat(BrokerExporterReporter.running(logDirs)).as("stopped with the broker").isNull();
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

    private static int freePort() throws java.io.IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static List<RdmaKafkaConsumerTest.Seen> readAll(Consumer<String, String> c, String topic) {
        try (c) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            c.assign(tps);
            c.seekToBeginning(tps);
            List<RdmaKafkaConsumerTest.Seen> all = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (all.size() < 2000 && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    all.add(RdmaKafkaConsumerTest.Seen.of(r));
                }
            }
            all.sort(java.util.Comparator.comparing(RdmaKafkaConsumerTest.Seen::partition)); // stable: keeps per-partition order
            return all;
        }
    }
}
