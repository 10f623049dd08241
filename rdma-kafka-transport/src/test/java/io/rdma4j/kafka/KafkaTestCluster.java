package io.rdma4j.kafka;

import io.rdma4j.kafka.exporter.ExporterConfig;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A KRaft cluster from the 4.3.1 test kit, with the settings single-replica groups and transactions need: one combined
 * node, or {@link #brokersOn several brokers}, each advertising a host of its own, and one controller.
 * Public in this module's test-jar: the soft-RDMA lab's Kafka flow (it/lab-kafka) starts its brokers with it.
 */
public final class KafkaTestCluster implements AutoCloseable {

    final KafkaClusterTestKit kit;

    public KafkaTestCluster() throws Exception {
        this(Map.of());
    }

    /** {@code extra}: further broker properties (e.g. the broker-side exporter's metric reporter). */
    public KafkaTestCluster(Map<String, String> extra) throws Exception {
        this(new TestKitNodes.Builder().setCombined(true).setNumBrokerNodes(1).setNumControllerNodes(1).build(), extra);
    }

    /**
     * One broker per host in {@code hosts} (broker ids 0, 1, ...), each listening on all addresses and advertising its
     * host, so that per-broker services on one port convention (the log exporters) can run on one machine; and one
     * controller apart from them.
     */
    public static KafkaTestCluster brokersOn(List<String> hosts, Map<String, String> extra) throws Exception {
        Map<Integer, Map<String, String>> perBroker = new HashMap<>();
        for (int id = 0; id < hosts.size(); id++) {
            // The kit pre-binds each broker's listener on the wildcard address and corrects port 0 when advertising.
            perBroker.put(id, Map.of("listeners", "EXTERNAL://" + hosts.get(id) + ":0"));
        }
        return new KafkaTestCluster(new TestKitNodes.Builder().setCombined(false).setNumBrokerNodes(hosts.size())
                .setNumControllerNodes(1).setPerServerProperties(perBroker).build(), extra);
    }

    private KafkaTestCluster(TestKitNodes nodes, Map<String, String> extra) throws Exception {
        KafkaClusterTestKit.Builder builder = new KafkaClusterTestKit.Builder(nodes);
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

    /** The first broker's log directories. */
    public String logDirs() {
        return logDirs(kit.nodes().brokerNodes().firstKey());
    }

    public String logDirs(int brokerId) {
        return String.join(",", kit.nodes().brokerNodes().get(brokerId).logDataDirectories());
    }

    /** Exporter properties for the first broker on the tcp provider; callers override {@code rdma.*} keys for another. */
    public Map<String, Object> exporterProps(String listen) {
        return exporterProps(kit.nodes().brokerNodes().firstKey(), listen);
    }

    /** Exporter properties for broker {@code brokerId} on the tcp provider. */
    public Map<String, Object> exporterProps(int brokerId, String listen) {
        Map<String, Object> p = new HashMap<>();
        p.put(ExporterConfig.LOG_DIRS, logDirs(brokerId));
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
