package io.rdma4j.core;

import io.rdma4j.core.internal.ProviderRegistry;
import io.rdma4j.core.spi.RdmaProvider;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ProviderSelectionTest {

    @Test
    void autoPicksTcpWhenItIsTheOnlyProviderHere() {
        // Only the tcp provider is on this module's class path (the verbs provider is not part of it yet).
        assertThat(ProviderRegistry.providers()).extracting(RdmaProvider::name).containsExactly("tcp");
        ProviderSelection s = ProviderRegistry.explain(TransportConfig.defaults());
        assertThat(s.provider()).isEqualTo("tcp");
        assertThat(s.reason()).startsWith("auto: ").contains("no RDMA device needed");
        try (RdmaTransport t = RdmaTransport.open(TransportConfig.defaults())) {
            assertThat(t.selection()).isEqualTo(s);
        }
    }

    @Test
    void namedProviderIsReportedAsConfigured() {
        ProviderSelection s = ProviderRegistry.explain(TransportConfig.builder().provider("tcp").build());
        assertThat(s.reason()).startsWith("configured: ");
    }

    @Test
    void unknownProviderNamesListTheKnownOnes() {
        assertThatThrownBy(() -> RdmaTransport.open(TransportConfig.builder().provider("infiniband").build()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'infiniband'").hasMessageContaining("tcp");
    }

    @Test
    void badTcpOptionsFailLoudly() {
        assertThatThrownBy(() -> RdmaTransport.open(TransportConfig.builder().provider("tcp").providerOption("tcp.chunk-sise", "1m").build()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tcp.chunk-sise").hasMessageContaining("tcp.chunk-size");
        assertThatThrownBy(() -> RdmaTransport.open(TransportConfig.builder().provider("tcp").providerOption("tcp.chunk-size", "1t").build()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("byte size");
        assertThatThrownBy(() -> RdmaTransport.open(TransportConfig.builder().provider("tcp").providerOption("tcp.chunk-size", "1g").build()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("between");
    }
}
