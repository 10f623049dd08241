package io.rdma4j.kafka;

import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RdmaConsumerConfigTest {

    @Test
    void decodingAheadIsChosenByTheProcessorsUnlessSetAndOtherWordsAreRefused() {
        boolean manyProcessors = Runtime.getRuntime().availableProcessors() > 2;
        assertThat(RdmaConsumerConfig.from(Map.of()).decodeAhead()).as("default").isEqualTo(manyProcessors);
        assertThat(RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.DECODE_AHEAD, " AUTO ")).decodeAhead()).isEqualTo(manyProcessors);
        assertThat(RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.DECODE_AHEAD, "true")).decodeAhead()).isTrue();
        assertThat(RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.DECODE_AHEAD, false)).decodeAhead()).isFalse();
        assertThatThrownBy(() -> RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.DECODE_AHEAD, "yes")))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("rdma.fetch.decode.ahead needs true, false or auto, got 'yes'");
    }

    @Test
    void connectingEarlyIsOnUnlessSetToFalse() {
        assertThat(RdmaConsumerConfig.from(Map.of()).connectEarly()).as("default").isTrue();
        assertThat(RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.CONNECT_EARLY, " false ")).connectEarly()).isFalse();
        assertThat(RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.CONNECT_EARLY, true)).connectEarly()).isTrue();
        assertThatThrownBy(() -> RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.CONNECT_EARLY, "soon")))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("rdma.fetch.connect.early must be true or false, got 'soon'");
    }
}
