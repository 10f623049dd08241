package io.rdma4j.kafka;

import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaFixtures.Seen;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static io.rdma4j.testsupport.kafka.KafkaFixtures.address;
import static io.rdma4j.testsupport.kafka.KafkaFixtures.pollUntil;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Registered-memory limits ({@code tcp.max-registered-bytes} here, {@code RLIMIT_MEMLOCK} on verbs) too low for the
 * exporter or the consumer. A broker of its own: an exporter's limit counts every partition it exports.
 */
class ExporterMemoryLimitTest {

    private static KafkaTestCluster cluster;

    @BeforeAll
    static void start() throws Exception {
        cluster = new KafkaTestCluster();
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) cluster.close();
    }

    /**
     * The exporter cannot refresh the partition's watermark past what it could register. The consumer reads by RDMA
     * what lies below it, and once it has not changed for {@link SegmentLocator#WATERMARK_STALE} Kafka's fetch serves
     * the rest: every record arrives, none twice, instead of the partition standing still.
     */
    @Test
    void anExporterThatCannotRegisterNewDataLeavesThePartitionToKafkasFetch() throws Exception {
        String topic = "limited";
        TopicPartition tp = topicWith(topic, 300);
        Map<String, Object> props = new HashMap<>(cluster.exporterProps("127.0.0.1:0"));
        props.put("rdma.tcp.max-registered-bytes", "128k");
        try (LogExporter limited = LogExporter.start(ExporterConfig.fromProperties(props));
             Consumer<String, String> c = RdmaConsumerFactory.create(consumerProps(limited), null, null)) {
            c.assign(List.of(tp));
            List<Seen> first = pollUntil(c, 300);
            assertThat(first).hasSize(300);
            assertThat(KafkaFixtures.rdmaRecords(c)).as("the first 300 records (about 35 KB) by RDMA").isEqualTo(300);

            produce(topic, 300, 5000); // about 580 KB more: past the limit
            List<Seen> rest = pollUntil(c, 5000);
            assertThat(rest).hasSize(5000);
            assertThat(rest.stream().map(Seen::offset).distinct().count()).as("none twice").isEqualTo(5000);
            assertThat(rest.getFirst().offset()).isEqualTo(300);
            assertThat(rest.getLast().offset()).isEqualTo(5299);
            assertThat(KafkaFixtures.fallbacks(c)).as("the partition went to Kafka's fetch")
                    .containsKey(FallbackReason.EXPORTER_STALLED.tag());
            assertThat(limited.exportedHighWatermark(tp)).as("the watermark the exporter could publish").isLessThan(5300);
        }
    }

    /**
     * A consumer whose own registered-memory limit is too low for its read buffers: the records come through Kafka's
     * fetch, every one once, and the reason is counted, rather than the consumer failing.
     */
    @Test
    void aConsumerThatCannotRegisterItsReadBuffersReadsThroughKafka() throws Exception {
        TopicPartition tp = topicWith("consumer-limited", 2000);
        try (LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")))) {
            Map<String, Object> props = new HashMap<>(consumerProps(exporter));
            props.put("rdma.tcp.max-registered-bytes", "4k");
            try (Consumer<String, String> c = RdmaConsumerFactory.create(props, null, null)) {
                c.assign(List.of(tp));
                List<Seen> got = pollUntil(c, 2000);
                assertThat(got).hasSize(2000);
                assertThat(got.stream().map(Seen::offset).distinct().count()).as("none twice").isEqualTo(2000);
                assertThat(KafkaFixtures.fallbacks(c)).as("its READs could not start").containsKey(FallbackReason.READ_FAILED.tag());
                assertThat(KafkaFixtures.rdmaRecords(c)).isZero();
            }
        }
    }

    /** A new topic of one partition holding {@code records} records (offsets 0 on). */
    private static TopicPartition topicWith(String topic, int records) throws Exception {
        KafkaFixtures.createTopic(cluster.bootstrap(), topic, 1);
        produce(topic, 0, records);
        return new TopicPartition(topic, 0);
    }

    private static void produce(String topic, int from, int count) throws Exception {
        try (KafkaProducer<String, String> p = new KafkaProducer<>(Map.of("bootstrap.servers", cluster.bootstrap(),
                "key.serializer", StringSerializer.class, "value.serializer", StringSerializer.class))) {
            List<java.util.concurrent.Future<?>> acks = new java.util.ArrayList<>();
            for (int i = from; i < from + count; i++) {
                acks.add(p.send(new ProducerRecord<>(topic, "k" + i, KafkaFixtures.value(i, 100))));
            }
            for (java.util.concurrent.Future<?> ack : acks) {
                ack.get();
            }
        }
    }

    private static Map<String, Object> consumerProps(LogExporter exporter) {
        return KafkaFixtures.waitingForRdma(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap(),
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class,
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false",
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
                "rdma.fetch.enabled", "true",
                "rdma.exporter.address", address(exporter.address()),
                "rdma.provider", "tcp"));
    }
}
