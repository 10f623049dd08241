package io.rdma4j.core;

import io.rdma4j.core.internal.ProviderRegistry;
import io.rdma4j.core.spi.RdmaProvider;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ProviderSelectionTest {

    @Test
    void autoPicksTheFirstUsableProviderInPreferenceOrderAndSaysWhyNotTheOthers() {
        TransportConfig config = TransportConfig.defaults();
        List<RdmaProvider> providers = ProviderRegistry.providers();
        assertThat(providers).extracting(RdmaProvider::name).containsExactly("verbs", "tcp");
        RdmaProvider firstUsable = providers.stream().filter(p -> p.probe(config).usable()).findFirst().orElseThrow();
        ProviderSelection s = ProviderRegistry.explain(config);
        assertThat(s.provider()).isEqualTo(firstUsable.name());
        assertThat(s.reason()).startsWith("auto: ").endsWith(firstUsable.probe(config).reason());
        for (RdmaProvider skipped : providers.subList(0, providers.indexOf(firstUsable))) {
            assertThat(s.reason()).contains(skipped.name() + " unusable: " + skipped.probe(config).reason());
        }
        try (RdmaTransport t = RdmaTransport.open(config)) {
            assertThat(t.selection()).isEqualTo(s);
        }
    }

    @Test
    void namedProviderIsReportedAsConfigured() {
        ProviderSelection s = ProviderRegistry.explain(TransportConfig.builder().provider("tcp").build());
        assertThat(s.reason()).startsWith("configured: ");
        assertThat(s.summary()).isEqualTo("configured: software emulation over TCP");
        assertThat(s).hasToString("tcp (configured: software emulation over TCP)");
    }

    @Test
    void summaryIsOneShortLineAndTheDetailsStayInTheReason() {
        TransportConfig config = TransportConfig.defaults();
        ProviderSelection s = ProviderRegistry.explain(config);
        RdmaProvider verbs = ProviderRegistry.providers().getFirst();
        var verbsHere = verbs.probe(config);
        if (s.provider().equals("tcp")) {
            assertThat(verbsHere.usable()).isFalse();
            assertThat(s.summary()).isEqualTo("auto: " + verbsHere.summary() + "; run rdma4j-doctor.jar for details");
        } else {
            assertThat(s.summary()).isEqualTo("auto: " + verbsHere.summary());
        }
        assertThat(s.toString()).hasSizeLessThan(100).doesNotContain("\n").doesNotContain("memlock")
                .isEqualTo(s.provider() + " (" + s.summary() + ")");
        assertThat(s.reason()).contains(verbsHere.reason());
    }

    @Test
    void aSharedSecretDoesNotChangeWhatAutoChooses() {
        ProviderSelection plain = ProviderRegistry.explain(TransportConfig.defaults());
        ProviderSelection withSecret = ProviderRegistry.explain(TransportConfig.builder().sharedSecret("sixteen-bytes-secret").build());
        assertThat(withSecret.provider()).as("both providers enforce the secret").isEqualTo(plain.provider());
        assertThat(withSecret.summary()).isEqualTo(plain.summary());
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
