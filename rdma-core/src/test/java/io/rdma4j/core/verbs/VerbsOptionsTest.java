package io.rdma4j.core.verbs;

import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The {@code verbs.*} options: defaults, ranges, and typos rejected with the known keys. */
class VerbsOptionsTest {

    private static TransportConfig with(String key, String value) {
        return TransportConfig.builder().provider("verbs").providerOption(key, value).build();
    }

    @Test
    void defaults() {
        VerbsOptions o = VerbsOptions.from(TransportConfig.defaults());
        assertThat(o.receiveDepth()).isEqualTo(32);
        assertThat(o.busyPoll()).isFalse();
        assertThat(o.awaitSpinNanos()).isEqualTo(TimeUnit.MICROSECONDS.toNanos(1000));
    }

    @Test
    void valuesAreRead() {
        TransportConfig c = TransportConfig.builder().providerOption("verbs.receive-depth", "4096")
                .providerOption("verbs.busy-poll", "true").providerOption("verbs.await-spin-micros", "0").build();
        VerbsOptions o = VerbsOptions.from(c);
        assertThat(o.receiveDepth()).isEqualTo(4096);
        assertThat(o.busyPoll()).isTrue();
        assertThat(o.awaitSpinNanos()).isZero();
    }

    @Test
    void aTypoIsRejectedWithTheKnownKeys() {
        assertThatThrownBy(() -> VerbsOptions.from(with("verbs.recieve-depth", "64")))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'verbs.recieve-depth'")
                .hasMessageContaining("verbs.await-spin-micros, verbs.busy-poll, verbs.receive-depth");
    }

    @Test
    void otherProvidersKeysAreNotItsBusiness() {
        assertThat(VerbsOptions.from(with("tcp.chunk-size", "64k")).receiveDepth()).isEqualTo(32);
    }

    @Test
    void rangesAreCheckedAndSayWhatToSet() {
        assertThatThrownBy(() -> VerbsOptions.from(with("verbs.receive-depth", "1")))
                .hasMessageContaining("verbs.receive-depth must be in [2, 4096], got 1");
        assertThatThrownBy(() -> VerbsOptions.from(with("verbs.receive-depth", "4097")))
                .hasMessageContaining("got 4097");
        assertThatThrownBy(() -> VerbsOptions.from(with("verbs.receive-depth", "many")))
                .hasMessageContaining("'verbs.receive-depth' needs an integer, got 'many'");
        assertThatThrownBy(() -> VerbsOptions.from(with("verbs.await-spin-micros", "-1")))
                .hasMessageContaining("verbs.await-spin-micros must be in [0, 1000000], got -1");
        assertThatThrownBy(() -> VerbsOptions.from(with("verbs.await-spin-micros", "1000001")))
                .hasMessageContaining("got 1000001");
        assertThatThrownBy(() -> VerbsOptions.from(with("verbs.busy-poll", "yes")))
                .hasMessageContaining("verbs.busy-poll must be true or false, got 'yes'");
    }

    @Test
    void theProviderRejectsATypoWhenOpened() {
        assertThatThrownBy(() -> new VerbsProvider().open(with("verbs.recieve-depth", "64"), null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unknown verbs provider option");
    }
}
