package io.rdma4j.kafka.exporter;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ExporterConfigTest {

    @TempDir
    Path logs;

    private Map<String, Object> props() {
        Map<String, Object> p = new HashMap<>();
        p.put(ExporterConfig.LOG_DIRS, logs.toString());
        p.put(ExporterConfig.BOOTSTRAP, "127.0.0.1:9092");
        return p;
    }

    @Test
    void aclsNeedASaslAdminClientAndTheMessageSaysWhatToSet() {
        Map<String, Object> p = props();
        p.put(ExporterConfig.ACLS, "true");
        assertThatThrownBy(() -> ExporterConfig.fromProperties(p)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("rdma.exporter.admin.security.protocol=SASL_SSL")
                .hasMessageContaining("rdma.exporter.acls=false").hasMessageContaining("PLAINTEXT");
        p.put(ExporterConfig.ADMIN_PREFIX + "security.protocol", "SASL_SSL");
        ExporterConfig config = ExporterConfig.fromProperties(p);
        assertThat(config.acls()).isEqualTo(AclMode.ON);
        assertThat(config.tokenMechanism()).isEqualTo("SCRAM-SHA-512");
        assertThat(config.aclCache().toMillis()).isEqualTo(30_000);
    }

    /**
     * A watermark interval over a second is lowered to one (consumers take a watermark unchanged for 10 s for a stopped
     * exporter) rather than refused, so that a broker whose plugin was configured so still starts; zero is refused.
     */
    @Test
    void aWatermarkIntervalOverASecondIsLoweredToOneAndZeroIsRefused() {
        Map<String, Object> p = props();
        p.put(ExporterConfig.INTERVAL, "20000");
        assertThat(ExporterConfig.fromProperties(p).watermarkInterval().toMillis()).isEqualTo(1000);
        p.put(ExporterConfig.INTERVAL, "250");
        assertThat(ExporterConfig.fromProperties(p).watermarkInterval().toMillis()).isEqualTo(250);
        p.put(ExporterConfig.INTERVAL, "0");
        assertThatThrownBy(() -> ExporterConfig.fromProperties(p)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("rdma.exporter.watermark.interval.ms must be positive");
    }

    @Test
    void insideABrokerWithAnAuthorizerAclsAreOnByDefault() {
        Map<String, Object> broker = new HashMap<>();
        broker.put("process.roles", "broker");
        broker.put("log.dirs", logs.toString());
        broker.put("listeners", "PLAINTEXT://127.0.0.1:9092");
        broker.put("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer");
        // The exporter's Admin client is left on PLAINTEXT: the broker refuses to start and says why.
        try (BrokerExporterReporter reporter = new BrokerExporterReporter()) {
            assertThatThrownBy(() -> reporter.configure(broker)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("rdma.exporter.acls=true needs");
        }
        Map<String, Object> sidecar = props();
        assertThat(ExporterConfig.fromProperties(sidecar).acls()).as("a sidecar asks the cluster").isEqualTo(AclMode.AUTO);
        sidecar.put(ExporterConfig.ACLS, "maybe");
        assertThatThrownBy(() -> ExporterConfig.fromProperties(sidecar)).hasMessageContaining("auto, true or false");
    }

    @Test
    void anAnswerToDescribeAclsShowsAnAuthorizerUnlessSecurityIsDisabledAndNoAnswerShowsNothing() {
        assertThat(AclGate.authorizerShown(null)).as("ACLs listed").isTrue();
        assertThat(AclGate.authorizerShown(new java.util.concurrent.CompletionException(
                new org.apache.kafka.common.errors.SecurityDisabledException("no authorizer")))).isFalse();
        assertThat(AclGate.authorizerShown(new org.apache.kafka.common.errors.ClusterAuthorizationException("denied"))).isTrue();
        assertThat(AclGate.authorizerShown(new org.apache.kafka.common.errors.UnsupportedVersionException("old"))).isTrue();
        assertThat(AclGate.authorizerShown(new org.apache.kafka.common.errors.TimeoutException("no answer"))).isNull();
        assertThat(AclGate.authorizerShown(new org.apache.kafka.common.errors.SaslAuthenticationException("bad login"))).isNull();
    }

    @Test
    void aPortOffsetPutsTheExporterOnItsBrokersPortPlusTheOffset() {
        Map<String, Object> p = props();
        p.put(ExporterConfig.BOOTSTRAP, "127.0.0.1:9093");
        p.put(ExporterConfig.PORT_OFFSET, "207");
        assertThat(ExporterConfig.fromProperties(p).listenAddress()).isEqualTo(new java.net.InetSocketAddress("127.0.0.1", 9300));
        p.put(ExporterConfig.LISTEN, "127.0.0.2");
        assertThat(ExporterConfig.fromProperties(p).listenAddress()).isEqualTo(new java.net.InetSocketAddress("127.0.0.2", 9300));
        p.put(ExporterConfig.LISTEN, "127.0.0.2:9299");
        assertThatThrownBy(() -> ExporterConfig.fromProperties(p)).hasMessageContaining("either rdma.exporter.port.offset");
        p.remove(ExporterConfig.LISTEN);
        p.put(ExporterConfig.PORT_OFFSET, "65000");
        assertThatThrownBy(() -> ExporterConfig.fromProperties(p)).hasMessageContaining("choose a smaller offset");

        Map<String, Object> broker = new HashMap<>();
        broker.put("listeners", "CONTROLLER://0.0.0.0:9090,CLIENT://0.0.0.0:9093");
        broker.put("advertised.listeners", "CLIENT://10.0.0.5:9093");
        broker.put("controller.listener.names", "CONTROLLER");
        assertThat(BrokerExporterReporter.listenWithOffset(broker, "207", null)).isEqualTo("10.0.0.5:9300");
        assertThat(BrokerExporterReporter.listenWithOffset(broker, "207", "127.0.0.1")).isEqualTo("127.0.0.1:9300");
        broker.put("advertised.listeners", "CLIENT://10.0.0.5:0");
        assertThatThrownBy(() -> BrokerExporterReporter.listenWithOffset(broker, "207", null))
                .hasMessageContaining("set rdma.exporter.listen.address=host:port instead");
    }
}
