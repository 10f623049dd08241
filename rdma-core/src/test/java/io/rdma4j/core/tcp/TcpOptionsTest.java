package io.rdma4j.core.tcp;

import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TcpOptionsTest {

    private static TcpOptions options(String... keyValues) {
        TransportConfig.Builder b = TransportConfig.builder().provider("tcp");
        for (int i = 0; i < keyValues.length; i += 2) {
            b.providerOption("tcp." + keyValues[i], keyValues[i + 1]);
        }
        return TcpOptions.from(b.build());
    }

    @Test
    void handshakeBudgetsAreAQuarterOfTheConnectionCapsByDefault() {
        TcpOptions defaults = options();
        assertThat(defaults.maxHandshakes()).isEqualTo(1024);
        assertThat(defaults.maxHandshakesPerAddress()).isEqualTo(64);
        TcpOptions small = options("max-connections", "2", "max-connections-per-address", "1");
        assertThat(small.maxHandshakes()).isEqualTo(1);
        assertThat(small.maxHandshakesPerAddress()).isEqualTo(1);
    }

    @Test
    void handshakeBudgetsCannotExceedTheCapsTheyAreAPartOf() {
        assertThatThrownBy(() -> options("max-connections", "100", "max-handshakes", "101"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tcp.max-handshakes must be between 1 and 100");
        assertThatThrownBy(() -> options("max-connections-per-address", "8", "max-handshakes-per-address", "9"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("tcp.max-handshakes-per-address must be between 1 and 8");
        assertThat(options("max-handshakes", "10", "max-handshakes-per-address", "10").maxHandshakesPerAddress()).isEqualTo(10);
    }
}
