package io.rdma4j.kafka;

import io.rdma4j.kafka.exporter.ExporterConfig;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;

import java.util.HashMap;
import java.util.Map;

/**
 * One combined KRaft node from the 4.3.1 test kit, with the settings single-node groups and transactions need.
 * Public in this module's test-jar: the soft-RDMA lab's Kafka flow (it/lab-kafka) starts its broker with it.
 */
public final class KafkaTestCluster implements AutoCloseable {

    final KafkaClusterTestKit kit;

    public KafkaTestCluster() throws Exception {
        this(Map.of());
    }

    /** {@code extra}: further broker properties (e.g. the broker-side exporter's metric reporter). */
    public KafkaTestCluster(Map<String, String> extra) throws Exception {
        KafkaClusterTestKit.Builder builder = new KafkaClusterTestKit.Builder(new TestKitNodes.Builder().setCombined(true)
                .setNumBrokerNodes(1).setNumControllerNodes(1).build());
        extra.forEach(builder::setConfigProp);
        kit = builder
                .setConfigProp("offsets.topic.replication.factor", "1")
                .setConfigProp("offsets.topic.num.partitions", "1")
                .setConfigProp("transaction.state.log.replication.factor", "1")
                .setConfigProp("transaction.state.log.min.isr", "1")
                .setConfigProp("transaction.state.log.num.partitions", "1")
                .setConfigProp("group.initial.rebalance.delay.ms", "0")
                .setConfigProp("log.retention.check.interval.ms", "500")
                .setConfigProp("log.cleaner.backoff.ms", "200")
                .setConfigProp("file.delete.delay.ms", "1000")
                .build();
        kit.format();
        kit.startup();
        kit.waitForReadyBrokers();
    }

    public String bootstrap() {
        return kit.bootstrapServers();
    }

    public String logDirs() {
        return String.join(",", kit.nodes().brokerNodes().values().iterator().next().logDataDirectories());
    }

    /** Exporter properties for this broker on the tcp provider; callers override {@code rdma.*} keys for another. */
    public Map<String, Object> exporterProps(String listen) {
        Map<String, Object> p = new HashMap<>();
        p.put(ExporterConfig.LOG_DIRS, logDirs());
        p.put(ExporterConfig.BOOTSTRAP, bootstrap());
        p.put(ExporterConfig.LISTEN, listen);
        p.put(ExporterConfig.INTERVAL, "20");
        p.put(ExporterConfig.GRACE, "2000");
        p.put("rdma.provider", "tcp");
        return p;
    }

    /** Never throws InterruptedException, so try-with-resources cannot swallow an interrupt. */
    @Override
    public void close() {
        try {
            kit.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while stopping the Kafka test cluster", e);
        } catch (Exception e) {
            throw new IllegalStateException("the Kafka test cluster did not stop cleanly: " + e, e);
        }
    }
}
