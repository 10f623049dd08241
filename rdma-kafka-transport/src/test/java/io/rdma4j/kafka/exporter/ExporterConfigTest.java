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
        assertThat(config.acls()).isTrue();
        assertThat(config.tokenMechanism()).isEqualTo("SCRAM-SHA-512");
        assertThat(config.aclCache().toMillis()).isEqualTo(30_000);
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
        Map<String, Object> off = props();
        assertThat(ExporterConfig.fromProperties(off).acls()).as("a sidecar checks ACLs only when told").isFalse();
    }
}
