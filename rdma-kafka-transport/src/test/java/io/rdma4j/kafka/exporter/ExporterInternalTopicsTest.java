package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Kafka's internal topics (consumer offsets, transaction state) hold every group's and producer's state: the exporter
 * serves them to nobody unless configured to, not even to a peer that asks for them by name.
 */
class ExporterInternalTopicsTest {

    private static final TopicPartition OFFSETS = new TopicPartition("__consumer_offsets", 0);
    private static final TopicPartition TRANSACTIONS = new TopicPartition("__transaction_state", 0);
    private static final TopicPartition USER = new TopicPartition("orders", 0);

    private static KafkaTestCluster cluster;

    @BeforeAll
    static void start() throws Exception {
        cluster = new KafkaTestCluster();
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "internal-topics-test");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(USER.topic(), USER.partition(), "k", "v"));
            producer.commitTransaction();
        }
        Map<String, Object> c = Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap(),
                ConsumerConfig.GROUP_ID_CONFIG, "internal-topics-group");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            consumer.commitSync(Map.of(USER, new OffsetAndMetadata(1)));
        }
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    @Test
    void internalTopicsAreNotExportedAndAPeerAskingForThemGetsUnknownPartition() throws Exception {
        try (LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")))) {
            exporter.refresh();
            assertThat(exporter.exportedHighWatermark(USER)).as("a user topic is exported").isPositive();
            assertThat(exporter.exportedHighWatermark(OFFSETS)).as("__consumer_offsets is not").isEqualTo(-1);
            assertThat(exporter.exportedHighWatermark(TRANSACTIONS)).as("__transaction_state is not").isEqualTo(-1);
            try (RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
                 RdmaConnection c = peer.connect(exporter.address()).get()) {
                for (TopicPartition tp : List.of(OFFSETS, TRANSACTIONS)) {
                    SegmentDirectory.Response r = directory(c, tp);
                    assertThat(r.status()).as(tp + " asked by name").isEqualTo(SegmentDirectory.Status.UNKNOWN_PARTITION);
                    assertThat(r.segments()).isEmpty();
                }
                assertThat(directory(c, USER).status()).isEqualTo(SegmentDirectory.Status.OK);
            }
        }
    }

    @Test
    void internalTopicsAreExportedWhenConfigured() throws Exception {
        Map<String, Object> props = cluster.exporterProps("127.0.0.1:0");
        props.put(ExporterConfig.INTERNAL_TOPICS, "true");
        try (LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(props))) {
            exporter.refresh();
            assertThat(exporter.exportedHighWatermark(OFFSETS)).isPositive();
            assertThat(exporter.exportedHighWatermark(TRANSACTIONS)).isPositive();
        }
    }

    private static SegmentDirectory.Response directory(RdmaConnection c, TopicPartition tp) {
        return SegmentDirectory.Response.fromBytes(c.requestAndWait(RequestTypes.KAFKA_DIRECTORY,
                ByteBuffer.wrap(new SegmentDirectory.Request(tp.topic(), tp.partition(), 0).toBytes())));
    }
}
