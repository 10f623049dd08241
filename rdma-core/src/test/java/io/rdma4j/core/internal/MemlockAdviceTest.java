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
    void connectionsShareFourKibibyteSlotsAndEachAddsTwentyEightKibibytes() {
        assertThat(DEFAULTS.receiveSlotSize()).as("a 4 KiB fragment with its header").isEqualTo(4096);
        assertThat(DEFAULTS.bytesPerConnection()).as("2 reserved + 3 control receive slots, 2 staging slots")
                .isEqualTo(7 * 4096);
        // shared: 128 lent credits (a 1 MiB chunk), 128 staging slots (a 1 MiB chunk)
        assertThat(DEFAULTS.bytesFor(0)).isEqualTo(2L << 20);
        assertThat(DEFAULTS.bytesFor(64)).as("5 x 64 + 128 receive, 2 x 64 + 128 staging slots").isEqualTo(3L << 20);
        assertThat(DEFAULTS.bytesFor(1024)).as("5,248 receive slots in 21 chunks, 2,176 staging in 9").isEqualTo(30L << 20);
        MessageBufferSizing small = MessageBufferSizing.of(TransportConfig.builder().maxMessageSize(1024).build());
        assertThat(small.receiveSlotSize()).as("never more than the largest message").isEqualTo(8 + 1024);
        assertThat(small.settings()).isEqualTo("receive slots of 1032 B, 5 reserved per connection and 128 shared");
    }

    @Test
    void anEightMebibyteLimitHoldsHundredsOfConnectionsAndSaysHowToRaiseIt() {
        assertThat(MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 64, Optional.of(new MemlockLimit(8L << 20, 8L << 20))))
                .contains("64 connections need 3 MiB").contains("this host allows it").contains("leaves 5 MiB");
        String text = MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 1024, Optional.of(new MemlockLimit(8L << 20, 8L << 20)));
        int holds = DEFAULTS.connectionsWithin(8L << 20);
        assertThat(holds).isBetween(128, 1023);
        assertThat(DEFAULTS.bytesFor(holds)).isLessThanOrEqualTo(8L << 20);
        assertThat(DEFAULTS.bytesFor(holds + 1)).isGreaterThan(8L << 20);
        assertThat(text).contains("1024 connections need").contains("does not allow it").contains("holds " + holds + " connections;")
                .contains("ulimit -l unlimited").doesNotContain("without root");
        assertThat(MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 1024, Optional.of(new MemlockLimit(8L << 20, MemlockLimit.UNLIMITED))))
                .contains("allows raising it without root");
        assertThat(DEFAULTS.connectionsWithin(1L << 20)).as("not even the shared pools fit").isZero();
    }

    @Test
    void enoughRoomIsSaidWithWhatIsLeftForRegions() {
        long two = DEFAULTS.bytesFor(2);
        String text = MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 2, Optional.of(new MemlockLimit(two + (1L << 20), two + (1L << 20))));
        assertThat(text).contains("this host allows it").contains("leaves 1 MiB");
        assertThat(MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 1024, Optional.of(new MemlockLimit(MemlockLimit.UNLIMITED, MemlockLimit.UNLIMITED))))
                .contains("1024 connections need 30 MiB").contains("the limit is unlimited");
        assertThat(MemlockAdvice.text(DEFAULTS, DEFAULTS.settings(), 1, Optional.empty())).contains("1 connection needs").contains("unknown");
    }

    @Test
    void sizesReadAsPeopleWriteThem() {
        assertThat(MemlockAdvice.size(DEFAULTS.bytesPerConnection())).isEqualTo("28 KiB");
        assertThat(MemlockAdvice.size(9L << 29)).isEqualTo("4.5 GiB");
        assertThat(MemlockAdvice.size(288L << 20)).isEqualTo("288 MiB");
        assertThat(MemlockAdvice.size(8L << 20)).isEqualTo("8 MiB");
        assertThat(MemlockAdvice.size(900)).isEqualTo("900 B");
    }

    @Test
    void theDoctorSizesSlotsAsTheProviderDoes() {
        // the provider's max-message-size carries the transport's header: still one 4 KiB fragment per slot
        MessageBufferSizing provider = MessageBufferSizing.of(DefaultRdmaTransport.providerConfig(TransportConfig.defaults()));
        assertThat(provider).isEqualTo(DEFAULTS);
    }

    @Test
    void theDoctorSizesForTheConnectionsItIsGiven() {
        assertThat(Doctor.report(TransportConfig.defaults(), 64)).contains("memlock: verbs registers").contains("64 connections need");
        assertThat(Doctor.report(TransportConfig.defaults())).contains(Doctor.DEFAULT_CONNECTIONS + " connections need");
    }
}
