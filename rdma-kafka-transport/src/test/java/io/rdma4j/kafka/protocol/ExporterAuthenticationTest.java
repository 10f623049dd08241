package io.rdma4j.kafka.protocol;

import io.rdma4j.core.ProtocolException;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ExporterAuthenticationTest {

    @Test
    void requestsRoundTrip() {
        assertThat(ExporterAuthentication.Request.fromBytes(ByteBuffer.wrap(new ExporterAuthentication.Challenge().toBytes())))
                .isInstanceOf(ExporterAuthentication.Challenge.class);
        byte[] proof = ExporterAuthentication.proof(new byte[] {1, 2, 3}, new byte[32], "tok");
        var parsed = (ExporterAuthentication.Proof) ExporterAuthentication.Request.fromBytes(
                ByteBuffer.wrap(new ExporterAuthentication.Proof("tok", proof).toBytes()));
        assertThat(parsed.tokenId()).isEqualTo("tok");
        assertThat(parsed.proof()).isEqualTo(proof);
        assertThat(parsed.topics()).isEmpty();

        var naming = (ExporterAuthentication.Proof) ExporterAuthentication.Request.fromBytes(
                ByteBuffer.wrap(new ExporterAuthentication.Proof("tok", proof, List.of("orders", "payments.v2")).toBytes()));
        assertThat(naming.proof()).isEqualTo(proof);
        assertThat(naming.topics()).containsExactly("orders", "payments.v2");
    }

    @Test
    void aProofNamesAtMostItsLimitOfTopicsEachOfAKafkaLength() {
        List<String> tooMany = IntStream.rangeClosed(0, ExporterAuthentication.MAX_TOPICS_PER_PROOF).mapToObj(i -> "t" + i).toList();
        assertThatThrownBy(() -> new ExporterAuthentication.Proof("tok", new byte[32], tooMany))
                .isInstanceOf(IllegalArgumentException.class);
        byte[] base = new ExporterAuthentication.Proof("tok", new byte[32]).toBytes();
        ByteBuffer countOverLimit = ByteBuffer.allocate(base.length + 2).put(base).putShort((short) (ExporterAuthentication.MAX_TOPICS_PER_PROOF + 1));
        ByteBuffer noTopics = ByteBuffer.allocate(base.length + 2).put(base).putShort((short) 0);
        ByteBuffer longName = ByteBuffer.allocate(base.length + 4 + 250).put(base).putShort((short) 1).putShort((short) 250).put(new byte[250]);
        ByteBuffer lyingLength = ByteBuffer.allocate(base.length + 4 + 3).put(base).putShort((short) 1).putShort((short) 9).put(new byte[3]);
        for (ByteBuffer bad : List.of(countOverLimit, noTopics, longName, lyingLength)) {
            assertThatThrownBy(() -> ExporterAuthentication.Request.fromBytes(bad.flip())).isInstanceOf(ProtocolException.class);
        }
        String longest = "x".repeat(ExporterAuthentication.MAX_TOPIC_BYTES);
        assertThat(((ExporterAuthentication.Proof) ExporterAuthentication.Request.fromBytes(ByteBuffer.wrap(
                new ExporterAuthentication.Proof("tok", new byte[32], List.of(longest)).toBytes()))).topics()).containsExactly(longest);
    }

    @Test
    void theProofDependsOnKeyNonceAndTokenId() {
        byte[] nonce = new byte[32];
        byte[] base = ExporterAuthentication.proof(new byte[] {1}, nonce, "a");
        byte[] otherNonce = nonce.clone();
        otherNonce[0] = 1;
        assertThat(base).hasSize(32)
                .isNotEqualTo(ExporterAuthentication.proof(new byte[] {2}, nonce, "a"))
                .isNotEqualTo(ExporterAuthentication.proof(new byte[] {1}, otherNonce, "a"))
                .isNotEqualTo(ExporterAuthentication.proof(new byte[] {1}, nonce, "b"));
    }

    @Test
    void malformedRequestsAreProtocolErrors() {
        byte[] proof = new ExporterAuthentication.Proof("tok", new byte[32]).toBytes();
        for (byte[] bad : new byte[][] {
                {}, {9}, {1, 0}, Arrays.copyOf(proof, proof.length - 1), Arrays.copyOf(proof, proof.length + 1),
                ByteBuffer.allocate(3 + 32).put((byte) 2).putShort((short) 0).array(),
                ByteBuffer.allocate(3).put((byte) 2).putShort((short) 0xffff).array()}) {
            assertThatThrownBy(() -> ExporterAuthentication.Request.fromBytes(ByteBuffer.wrap(bad)))
                    .as(Arrays.toString(bad)).isInstanceOf(ProtocolException.class);
        }
        assertThatThrownBy(() -> ExporterAuthentication.nonce(ByteBuffer.allocate(31))).isInstanceOf(ProtocolException.class);
    }

    @Test
    void verdictsRoundTripAndAnythingElseIsAProtocolError() {
        for (ExporterAuthentication.Verdict v : ExporterAuthentication.Verdict.values()) {
            assertThat(ExporterAuthentication.Verdict.fromBytes(ByteBuffer.wrap(v.toBytes()))).isEqualTo(v);
        }
        for (byte[] bad : new byte[][] {{}, {2}, {-1}, {1, 1}}) {
            assertThatThrownBy(() -> ExporterAuthentication.Verdict.fromBytes(ByteBuffer.wrap(bad)))
                    .as(Arrays.toString(bad)).isInstanceOf(ProtocolException.class);
        }
    }
}
