package io.rdma4j.it.lab.kafka;

import io.rdma4j.it.lab.LabDevice;
import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import io.rdma4j.testsupport.kafka.MixedWorkload;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;

import static io.rdma4j.it.lab.kafka.RdmaConsumerOverRxeGuestTest.TIMEOUT_MS;
import static io.rdma4j.it.lab.kafka.RdmaConsumerOverRxeGuestTest.WAIT;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Inside the soft-RDMA lab (run by {@link KafkaRxeBenchmarkLabTest}, profile bench): the host benchmark's mixed
 * workload read by the RDMA consumer on the verbs provider over rxe0, against a plain KafkaConsumer of the same
 * broker, uncompressed and lz4, in alternating rounds (who goes first too). Under QEMU TCG only the ratio means
 * something; it is printed, not asserted. Every record must come by RDMA, or the comparison would not be one.
 */
class RdmaConsumerRxeBenchmarkGuestTest {

    private static final int RECORDS = Integer.getInteger("bench.lab.kafka.records", 10_000);
    private static final int ROUNDS = Integer.getInteger("bench.lab.kafka.rounds", 3);
    private static final int PARTITIONS = 2;

    @Test
    void rdmaOverRxeVersusPlainOnMixedRecords() throws Exception {
        LabDevice device = LabDevice.current();
        try (KafkaTestCluster cluster = new KafkaTestCluster(Map.of("broker.session.timeout.ms", "60000"))) {
            Map<String, Object> exporterProps = new HashMap<>(cluster.exporterProps(device.address() + ":0"));
            exporterProps.putAll(RdmaConsumerOverRxeGuestTest.verbsTransport(device));
            exporterProps.put(ExporterConfig.INTERVAL, "200");
            try (LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(exporterProps));
                 Admin admin = Admin.create(Map.of("bootstrap.servers", cluster.bootstrap(),
                         "default.api.timeout.ms", TIMEOUT_MS, "request.timeout.ms", TIMEOUT_MS))) {
                List<String> topics = List.of("mixed-uncompressed", "mixed-lz4");
                for (String topic : topics) {
                    String codec = topic.equals("mixed-lz4") ? "lz4" : "none";
                    admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)
                            .configs(Map.of("compression.type", codec.equals("none") ? "uncompressed" : codec)))).all().get();
                    Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                    partitions(topic).forEach(tp -> latest.put(tp, OffsetSpec.latest()));
                    KafkaFixtures.awaitLeaders(admin, latest);
                    long bytes = MixedWorkload.produce(cluster.bootstrap(), topic, codec, RECORDS, Map.of(
                            "request.timeout.ms", TIMEOUT_MS, "delivery.timeout.ms", Long.toString(WAIT.toMillis()),
                            "max.block.ms", TIMEOUT_MS));
                    System.out.printf("produced %s: %d records, %.1f MB of keys and values%n", topic, RECORDS, bytes / 1e6);
                    for (var e : admin.listOffsets(latest).all().get().entrySet()) {
                        RdmaConsumerOverRxeGuestTest.awaitExported(exporter, e.getKey(), e.getValue().offset());
                    }
                }
                Map<String, Object> plain = new HashMap<>();
                plain.put("bootstrap.servers", cluster.bootstrap());
                plain.put("enable.auto.commit", "false");
                plain.put("max.poll.records", "2000");
                plain.put("request.timeout.ms", TIMEOUT_MS);
                plain.put("default.api.timeout.ms", TIMEOUT_MS);
                Map<String, Object> rdma = new HashMap<>(plain);
                rdma.put("rdma.fetch.enabled", "true");
                rdma.put("rdma.exporter.address", device.address() + ":" + exporter.address().getPort());
                rdma.put("rdma.fetch.poll.interval.ms", "1");
                rdma.putAll(RdmaConsumerOverRxeGuestTest.verbsTransport(device));
                for (String topic : topics) {
                    read(topic, plain, false); // warm-up of both paths on this topic
                    read(topic, rdma, true);
                    List<Double> plainRounds = new ArrayList<>();
                    List<Double> rdmaRounds = new ArrayList<>();
                    for (int i = 0; i < ROUNDS; i++) {
                        boolean rdmaFirst = i % 2 == 1;
                        double first = read(topic, rdmaFirst ? rdma : plain, rdmaFirst);
                        double second = read(topic, rdmaFirst ? plain : rdma, !rdmaFirst);
                        (rdmaFirst ? rdmaRounds : plainRounds).add(first);
                        (rdmaFirst ? plainRounds : rdmaRounds).add(second);
                    }
                    double p = median(plainRounds);
                    double r = median(rdmaRounds);
                    // The lab test's console log keeps this line.
                    System.out.printf("LAB-KAFKA-BENCH: %s on %s, %d records, median of %d alternating rounds: plain KafkaConsumer"
                                    + " %.1f MB/s %s, RDMA over verbs %.1f MB/s %s; ratio RDMA/plain %.2fx%n", topic, device.name(),
                            RECORDS, ROUNDS, p, rounded(plainRounds), r, rounded(rdmaRounds), r / p);
                }
            }
        }
    }

    /** One read of the whole topic; MB/s of keys and values. */
    private static double read(String topic, Map<String, Object> props, boolean rdma) {
        try (Consumer<byte[], byte[]> c = rdma
                ? RdmaConsumerFactory.create(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())
                : new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            MixedWorkload.Read read = MixedWorkload.readAll(c, topic, PARTITIONS, RECORDS, WAIT);
            if (rdma) {
                RdmaKafkaConsumer<byte[], byte[]> r = (RdmaKafkaConsumer<byte[], byte[]>) c;
                assertThat(r.providerSelection().provider()).as("the consumer's provider").isEqualTo("verbs");
                // A new consumer reads through Kafka while it connects to the exporters; the rest is RDMA's.
                KafkaFixtures.assertReadByRdma(r, RECORDS, "records of " + topic);
            }
            return read.mbPerSec();
        }
    }

    private static List<TopicPartition> partitions(String topic) {
        return IntStream.range(0, PARTITIONS).mapToObj(p -> new TopicPartition(topic, p)).toList();
    }

    private static double median(List<Double> rounds) {
        return rounds.stream().sorted().toList().get(rounds.size() / 2);
    }

    private static List<String> rounded(List<Double> rounds) {
        return rounds.stream().map(v -> String.format("%.1f", v)).toList();
    }
}
