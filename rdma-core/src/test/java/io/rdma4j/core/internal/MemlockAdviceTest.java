package io.rdma4j.core.internal;

import io.rdma4j.core.doctor.Doctor;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.verbs.MessageBufferSizing;
import io.rdma4j.nativeloader.MemlockLimit;
import org.junit.jupiter.api.Test;

import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/** The doctor's memlock section: what N verbs connections register and whether the limit holds it. */
class MemlockAdviceTest {

    private static final MessageBufferSizing DEFAULTS = MessageBufferSizing.of(TransportConfig.defaults());

    @Test
    void theDefaultsRegisterTwiceThirtySixSlotsOfSixtyFourKibibytesPerConnection() {
        assertThat(DEFAULTS.slots()).as("receive-depth 32 + 4 for credit-only messages").isEqualTo(36);
        assertThat(DEFAULTS.slotSize()).isEqualTo(8 + 65536);
        assertThat(DEFAULTS.bytesPerConnection()).isEqualTo(2L * 36 * 65544);
        MessageBufferSizing small = MessageBufferSizing.of(TransportConfig.builder().maxMessageSize(4096)
                .providerOption("verbs.receive-depth", "8").build());
        assertThat(small.bytesPerConnection()).isEqualTo(2L * 12 * 4104);
        assertThat(small.settings()).isEqualTo("verbs.receive-depth 8, max-message-size 4096 B");
    }

    @Test
    void anEightMebibyteLimitHoldsOneDefaultConnectionAndSaysHowToRaiseIt() {
        String text = MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 64, Optional.of(new MemlockLimit(8L << 20, 8L << 20)));
        assertThat(text).contains("64 connections need").contains("does not allow it").contains("holds 1 connection;")
                .contains("ulimit -l unlimited").doesNotContain("without root");
        assertThat(MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 64, Optional.of(new MemlockLimit(8L << 20, MemlockLimit.UNLIMITED))))
                .contains("allows raising it without root");
    }

    @Test
    void enoughRoomIsSaidWithWhatIsLeftForRegions() {
        long perConnection = DEFAULTS.bytesPerConnection();
        String text = MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 2, Optional.of(new MemlockLimit(3 * perConnection, 3 * perConnection)));
        assertThat(text).contains("this host allows it").contains("leaves " + MemlockAdvice.size(perConnection));
        assertThat(MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 1024, Optional.of(new MemlockLimit(MemlockLimit.UNLIMITED, MemlockLimit.UNLIMITED))))
                .contains("1024 connections need").contains("the limit is unlimited");
        assertThat(MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 1, Optional.empty())).contains("1 connection needs").contains("unknown");
    }

    @Test
    void sizesReadAsPeopleWriteThem() {
        assertThat(MemlockAdvice.size(DEFAULTS.bytesPerConnection())).isEqualTo("4.5 MiB");
        assertThat(MemlockAdvice.size(64 * DEFAULTS.bytesPerConnection())).isEqualTo("288 MiB");
        assertThat(MemlockAdvice.size(1024 * DEFAULTS.bytesPerConnection())).isEqualTo("4.5 GiB");
        assertThat(MemlockAdvice.size(8L << 20)).isEqualTo("8 MiB");
        assertThat(MemlockAdvice.size(900)).isEqualTo("900 B");
    }

    @Test
    void theDoctorCountsTheTransportsHeaderInEverySlotAsTheProviderDoes() {
        // measured in the lab: 4,720,320 B per connection at the defaults (VerbsGuestTest), 36 slots of 65,560 B twice
        MessageBufferSizing provider = MessageBufferSizing.of(DefaultRdmaTransport.providerConfig(TransportConfig.defaults()));
        assertThat(provider.bytesPerConnection()).isEqualTo(4_720_320);
    }

    @Test
    void theDoctorSizesForTheConnectionsItIsGiven() {
        assertThat(Doctor.report(TransportConfig.defaults(), 64)).contains("memlock: verbs registers").contains("64 connections need");
        assertThat(Doctor.report(TransportConfig.defaults())).contains(Doctor.DEFAULT_CONNECTIONS + " connections need");
    }
}
