package io.rdma4j.core;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TransportConfigTest {

    @Test
    void readsPrefixedPropertiesAndIgnoresTheRest() {
        TransportConfig c = TransportConfig.fromProperties(Map.of(
                "spark.shuffle.rdma.provider", " TCP ",
                "spark.shuffle.rdma.connect-timeout", "500ms",
                "spark.shuffle.rdma.operation-timeout", "2m",
                "spark.shuffle.rdma.max-outstanding-operations", "8",
                "spark.shuffle.rdma.max-message-size", "1024",
                "spark.shuffle.rdma.shared-secret", "pw",
                "spark.shuffle.rdma.tcp.chunk-size", "64k",
                "spark.shuffle.rdma.buffer-size", "ignored: belongs to the integration",
                "spark.other", "x"), "spark.shuffle.rdma.");
        assertThat(c.provider()).isEqualTo("tcp");
        assertThat(c.connectTimeout()).isEqualTo(Duration.ofMillis(500));
        assertThat(c.operationTimeout()).isEqualTo(Duration.ofMinutes(2));
        assertThat(c.maxOutstandingOperations()).isEqualTo(8);
        assertThat(c.maxMessageSize()).isEqualTo(1024);
        assertThat(c.sharedSecretValue()).contains("pw");
        assertThat(c.option("tcp", "chunk-size")).contains("64k");
        assertThat(c.toString()).doesNotContain("pw");
    }

    @Test
    void defaultsWhenNothingIsSet() {
        TransportConfig c = TransportConfig.fromProperties(Map.of(), "x.");
        assertThat(c).isEqualTo(TransportConfig.defaults());
        assertThat(c.provider()).isEqualTo("auto");
        assertThat(c.sharedSecretValue()).isEmpty();
    }

    @Test
    void badValuesSayWhatIsExpected() {
        assertThatThrownBy(() -> TransportConfig.fromProperties(Map.of("p.max-message-size", "lots"), "p."))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("max-message-size").hasMessageContaining("integer");
        assertThatThrownBy(() -> TransportConfig.fromProperties(Map.of("p.operation-timeout", "soon"), "p."))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("duration");
        assertThatThrownBy(() -> TransportConfig.fromProperties(Map.of("p.max-outstanding-operations", "0"), "p."))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least 1");
        assertThatThrownBy(() -> TransportConfig.fromProperties(Map.of("p.max-message-size", "10"), "p."))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least 64");
    }

    @Test
    void parsesDurationForms() {
        assertThat(TransportConfig.parseDuration("k", "PT3S")).isEqualTo(Duration.ofSeconds(3));
        assertThat(TransportConfig.parseDuration("k", "250")).isEqualTo(Duration.ofMillis(250));
        assertThat(TransportConfig.parseDuration("k", "1h")).isEqualTo(Duration.ofHours(1));
    }
}
