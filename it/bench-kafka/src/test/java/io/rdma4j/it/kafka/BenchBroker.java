package io.rdma4j.it.kafka;

import io.rdma4j.kafka.KafkaTestCluster;
import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What every Kafka benchmark runs against: one broker (rdma-kafka-transport's {@link KafkaTestCluster}), its log
 * exporter on the tcp provider, and consumers of byte arrays either plain or reading by RDMA from that exporter.
 */
final class BenchBroker implements AutoCloseable {

    final KafkaTestCluster cluster;
    final LogExporter exporter;
    final Admin admin;
    final String watermarkIntervalMs = System.getProperty("bench.watermark.interval.ms", "5");

    BenchBroker() throws Exception {
        cluster = new KafkaTestCluster();
        Map<String, Object> ex = cluster.exporterProps("127.0.0.1:0");
        ex.put(ExporterConfig.INTERVAL, watermarkIntervalMs);
        exporter = LogExporter.start(ExporterConfig.fromProperties(ex));
        admin = Admin.create(Map.of("bootstrap.servers", cluster.bootstrap()));
    }

    String bootstrap() {
        return cluster.bootstrap();
    }

    void createTopics(NewTopic... topics) throws Exception {
        admin.createTopics(List.of(topics)).all().get();
    }

    /** A consumer of byte arrays: plain when {@code rdma} is false, else reading by RDMA (tcp provider) from the exporter. */
    Consumer<byte[], byte[]> consumer(boolean rdma) {
        return consumer(rdma, Map.of());
    }

    /** As {@link #consumer(boolean)}, with further client properties. */
    Consumer<byte[], byte[]> consumer(boolean rdma, Map<String, Object> more) {
        Map<String, Object> c = new HashMap<>();
        c.put("bootstrap.servers", cluster.bootstrap());
        c.put("enable.auto.commit", "false");
        c.put("max.poll.records", "2000");
        c.put("rdma.fetch.enabled", rdma);
        if (rdma) {
            c.put("rdma.exporter.address", "127.0.0.1:" + exporter.address().getPort());
            c.put("rdma.provider", "tcp");
            c.put("rdma.fetch.poll.interval.ms", "1");
        }
        c.putAll(more);
        return RdmaConsumerFactory.create(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public void close() throws Exception {
        try (cluster; exporter; admin) {
            // Closed in reverse: admin, exporter, then the broker.
        }
    }
}
