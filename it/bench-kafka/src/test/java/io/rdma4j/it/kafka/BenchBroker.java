package io.rdma4j.it.kafka;

import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What every Kafka benchmark runs against: one broker (rdma-kafka-transport's {@link KafkaTestCluster}) or several
 * (broker N advertising {@code 127.0.0.N}), a log exporter per broker on the tcp provider (one shared port), and
 * consumers of byte arrays either plain or reading by RDMA: from the one exporter's address, or with several brokers
 * from each partition's leader's exporter on the shared port.
 */
final class BenchBroker implements AutoCloseable {

    final KafkaTestCluster cluster;
    /** The first broker's exporter. */
    final LogExporter exporter;
    final List<LogExporter> exporters = new java.util.ArrayList<>();
    final Admin admin;
    final String watermarkIntervalMs = System.getProperty("bench.watermark.interval.ms", "5");

    BenchBroker() throws Exception {
        this(1);
    }

    BenchBroker(int brokers) throws Exception {
        cluster = brokers == 1 ? new KafkaTestCluster()
                : KafkaTestCluster.brokersOn(java.util.stream.IntStream.rangeClosed(1, brokers).mapToObj(n -> "127.0.0." + n).toList(),
                Map.of());
        int port = 0;
        for (int b = 0; b < brokers; b++) {
            Map<String, Object> ex = cluster.exporterProps(b, "127.0.0." + (b + 1) + ":" + port);
            ex.put(ExporterConfig.INTERVAL, watermarkIntervalMs);
            exporters.add(LogExporter.start(ExporterConfig.fromProperties(ex)));
            port = exporters.getFirst().address().getPort();
        }
        exporter = exporters.getFirst();
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
            if (exporters.size() == 1) {
                c.put("rdma.exporter.address", "127.0.0.1:" + exporter.address().getPort());
            } else {
                c.put("rdma.exporter.port", Integer.toString(exporter.address().getPort()));
            }
            c.put("rdma.provider", "tcp");
            c.put("rdma.fetch.poll.interval.ms", "1");
        }
        c.putAll(more);
        return RdmaConsumerFactory.create(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public void close() throws Exception {
        try (cluster) {
            admin.close();
            exporters.forEach(LogExporter::close);
        }
    }
}
