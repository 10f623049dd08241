package io.rdma4j.testsupport.kafka;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.test.JaasUtils;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;
import org.apache.kafka.common.utils.Exit;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A KRaft cluster from the 4.3.1 test kit, with the settings single-replica groups and transactions need: one combined
 * node, or {@link #brokersOn several brokers}, each advertising a host of its own, and one controller.
 * Used by rdma-kafka-transport's tests, the soft-RDMA lab's Kafka flow (it/lab-kafka), the Spring starter's Boot 4 run
 * and the Kafka benchmarks.
 */
public final class KafkaTestCluster implements AutoCloseable {

    /**
     * How long formatting, starting and the brokers' readiness may take together (a few seconds on a developer
     * machine): a KRaft start that hangs then fails with the stuck thread's stack instead of running into the CI's or
     * the lab's limit. System property {@code rdma4j.kafka.test.startupSeconds}.
     */
    private static final Duration STARTUP_LIMIT = Duration.ofSeconds(Long.getLong("rdma4j.kafka.test.startupSeconds", 300));
    private static final Duration CLOSE_AFTER_FAILED_START_LIMIT = Duration.ofSeconds(60);
    /** Threads of the brokers and controllers (kafka-*, broker-*, controller-*, quorum and raft threads, ...). */
    private static final Pattern KAFKA_THREAD = Pattern.compile("(?i)kafka|broker|controller|raft|quorum|metadata|ExpirationReaper");

    private final KafkaClusterTestKit kit;

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

    /**
     * A cluster whose listeners are SASL_PLAINTEXT. The kit itself configures PLAIN with the users
     * {@link JaasUtils#KAFKA_PLAIN_ADMIN plain-admin} (super user, also the inter-node principal) and
     * {@link JaasUtils#KAFKA_PLAIN_USER1 plain-user1}, the StandardAuthorizer and
     * {@code allow.everyone.if.no.acl.found=false}; this adds SCRAM-SHA-512 and delegation tokens (which authenticate
     * with SCRAM). One combined node for one broker, else {@code brokers} brokers (ids 0, 1, ..., all advertising
     * localhost) and one controller; then broker 0 also has a PLAINTEXT listener ({@link #plaintextBootstrap}), where
     * clients are {@code User:ANONYMOUS}. The controller listener is SASL too: on a PLAINTEXT one the authorizer of a
     * combined node denies User:ANONYMOUS the CLUSTER_ACTION of broker registration, and a controller apart without
     * authorizer answers CreateAcls with SecurityDisabledException. A token reaches a broker's cache a few hundred ms
     * after createDelegationToken returns. {@code extra}: further properties for all nodes.
     */
    public static KafkaTestCluster secured(int brokers, Map<String, String> extra) throws Exception {
        Map<String, String> props = new HashMap<>();
        props.put("delegation.token.secret.key", "rdma4j-test-delegation-token-secret");
        props.put("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512");
        props.putAll(extra);
        Map<Integer, Map<String, String>> perBroker = brokers == 1 ? Map.of() : Map.of(0, Map.of(
                "listeners", "EXTERNAL://localhost:0," + PLAINTEXT_LISTENER + "://localhost:0",
                "listener.security.protocol.map", "EXTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT," + PLAINTEXT_LISTENER + ":PLAINTEXT"));
        return new KafkaTestCluster(new TestKitNodes.Builder().setCombined(brokers == 1)
                .setNumBrokerNodes(brokers).setNumControllerNodes(1).setPerServerProperties(perBroker)
                .setBrokerSecurityProtocol(SecurityProtocol.SASL_PLAINTEXT)
                .setControllerSecurityProtocol(SecurityProtocol.SASL_PLAINTEXT).build(), props);
    }

    private static final String PLAINTEXT_LISTENER = "PLAIN";

    /** host:port of broker 0's PLAINTEXT listener on a {@link #secured} cluster of several brokers. */
    public String plaintextBootstrap() {
        return "localhost:" + kit.brokers().get(0).boundPort(new org.apache.kafka.common.network.ListenerName(PLAINTEXT_LISTENER));
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
                // Retention and cleaning start at once, not 30 s after the broker (Kafka's default initial delay).
                .setConfigProp("log.initial.task.delay.ms", "0")
                .setConfigProp("log.cleaner.backoff.ms", "200")
                .setConfigProp("file.delete.delay.ms", "1000")
                .build();
        try {
            new BoundedSteps("kafka-test-cluster-start", STARTUP_LIMIT, t -> KAFKA_THREAD.matcher(t.getName()).find())
                    .step("formatting the Kafka test cluster", kit::format)
                    .step("starting the Kafka test cluster", kit::startup)
                    .step("waiting for the Kafka test cluster's brokers to be ready", kit::waitForReadyBrokers)
                    .run("not retried; if this machine is merely slow, raise -Drdma4j.kafka.test.startupSeconds (now "
                            + STARTUP_LIMIT.toSeconds() + ")");
        } catch (Exception failed) {
            closeAfterFailedStart(failed);
            throw failed;
        }
    }

    /** So that no broker or controller of a failed start outlives it; what goes wrong here is added to {@code failed}. */
    private void closeAfterFailedStart(Exception failed) {
        // A broker torn down mid-start finds its log dir deleted under it and halts the JVM (LogManager's log dir
        // failure), which would take the test report, and the reason above, with it. From here on Kafka only says so.
        Exit.Procedure report = (status, message) -> System.err.println("[KafkaTestCluster] Kafka asked to end the JVM"
                + " with status " + status + " while its failed start was being closed; ignored: " + message);
        Exit.setHaltProcedure(report);
        Exit.setExitProcedure(report);
        try {
            new BoundedSteps("kafka-test-cluster-close", CLOSE_AFTER_FAILED_START_LIMIT, t -> false)
                    .step("closing the Kafka test cluster after its failed start", kit::close)
                    .run("its threads may live on until the JVM exits");
        } catch (Exception e) {
            failed.addSuppressed(e);
        }
    }

    public String bootstrap() {
        return kit.bootstrapServers();
    }

    /** The test kit itself, for what this class does not wrap (stopping and starting one broker). */
    public KafkaClusterTestKit kit() {
        return kit;
    }

    /** Client properties for a {@link #secured} cluster: bootstrap, SASL_PLAINTEXT and PLAIN as {@code user}. */
    public Map<String, Object> clientProps(String user, String password) {
        Map<String, Object> p = new HashMap<>();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, SecurityProtocol.SASL_PLAINTEXT.name);
        p.put(SaslConfigs.SASL_MECHANISM, "PLAIN");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.plain.PlainLoginModule required"
                + " username=\"" + user + "\" password=\"" + password + "\";");
        return p;
    }

    /** An Admin of a {@link #secured} cluster's super user; the caller closes it. */
    public Admin superAdmin() {
        return Admin.create(clientProps(JaasUtils.KAFKA_PLAIN_ADMIN, JaasUtils.KAFKA_PLAIN_ADMIN_PASSWORD));
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

    /**
     * Exporter properties for broker {@code brokerId} on the tcp provider, by the keys an exporter's properties file
     * has (this module sits below rdma-kafka-transport and its {@code ExporterConfig}).
     */
    public Map<String, Object> exporterProps(int brokerId, String listen) {
        Map<String, Object> p = new HashMap<>();
        p.put("rdma.exporter.log.dirs", logDirs(brokerId));
        p.put("rdma.exporter.bootstrap.servers", bootstrap());
        p.put("rdma.exporter.listen.address", listen);
        p.put("rdma.exporter.watermark.interval.ms", "20");
        p.put("rdma.exporter.retire.grace.ms", "2000");
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
