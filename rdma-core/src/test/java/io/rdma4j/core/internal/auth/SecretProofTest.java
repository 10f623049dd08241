package io.rdma4j.core.internal.auth;

import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The proof both providers' handshakes exchange: it verifies only for the same secret, role, nonces and label. */
class SecretProofTest {

    private static final String LABEL = "rdma4j-test-auth-v1";
    private static final String SECRET = "a secret of 16+ bytes";
    private static final byte[] NONE = new byte[0];
    private final byte[] connectorNonce = SecretProof.nonce(16);
    private final byte[] listenerNonce = SecretProof.nonce(16);

    @Test
    void theSameSecretVerifies() {
        byte[] proof = SecretProof.proof(LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce, NONE);
        assertThat(proof).hasSize(SecretProof.PROOF_BYTES);
        assertThat(SecretProof.verify(proof, LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce, NONE)).isTrue();
    }

    @Test
    void aWrongSecretFails() {
        byte[] proof = SecretProof.proof(LABEL, "another secret, 16+ bytes", SecretProof.CONNECTOR, connectorNonce,
                listenerNonce, NONE);
        assertThat(SecretProof.verify(proof, LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce, NONE)).isFalse();
    }

    @Test
    void aReflectedProofFails() {
        // the listener's own proof sent back to it as the connector's: the role and the nonce order differ
        byte[] listenerProof = SecretProof.proof(LABEL, SECRET, SecretProof.LISTENER, listenerNonce, connectorNonce, NONE);
        assertThat(SecretProof.verify(listenerProof, LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce,
                NONE)).isFalse();
        // a peer that echoes the verifier's nonce back as its own and reflects the proof gains nothing either
        byte[] echoed = SecretProof.proof(LABEL, SECRET, SecretProof.LISTENER, listenerNonce, listenerNonce, NONE);
        assertThat(SecretProof.verify(echoed, LABEL, SECRET, SecretProof.CONNECTOR, listenerNonce, listenerNonce, NONE)).isFalse();
    }

    @Test
    void aWrongRoleNonceLabelOrBindingFails() {
        byte[] proof = SecretProof.proof(LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce, NONE);
        assertThat(SecretProof.verify(proof, LABEL, SECRET, SecretProof.LISTENER, connectorNonce, listenerNonce, NONE)).isFalse();
        assertThat(SecretProof.verify(proof, LABEL, SECRET, SecretProof.CONNECTOR, listenerNonce, connectorNonce, NONE)).isFalse();
        assertThat(SecretProof.verify(proof, LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, SecretProof.nonce(16),
                NONE)).as("replayed against a fresh nonce").isFalse();
        assertThat(SecretProof.verify(proof, "rdma4j-other-v1", SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce,
                NONE)).as("another protocol's label").isFalse();
        assertThat(SecretProof.verify(proof, LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce,
                new byte[] {1})).as("another channel binding").isFalse();
    }

    @Test
    void aShortLongOrMissingProofFails() {
        byte[] proof = SecretProof.proof(LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce, NONE);
        for (byte[] wrong : new byte[][] {Arrays.copyOf(proof, 31), Arrays.copyOf(proof, 33), new byte[0], null}) {
            assertThat(SecretProof.verify(wrong, LABEL, SECRET, SecretProof.CONNECTOR, connectorNonce, listenerNonce, NONE))
                    .isFalse();
        }
    }

    @Test
    void secretsShorterThan16BytesAreRefused() {
        assertThatCode(() -> SecretProof.checkSecret(null)).doesNotThrowAnyException();
        assertThatCode(() -> SecretProof.checkSecret("0123456789abcdef")).doesNotThrowAnyException();
        for (String s : new String[] {"", "short", "0123456789abcde"}) {
            assertThatThrownBy(() -> SecretProof.checkSecret(s)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("at least 16 bytes");
        }
        assertThatThrownBy(() -> SecretProof.checkSecret("0123456789abcde")).as("the secret is never echoed")
                .hasMessageNotContaining("0123456789abcde");
    }

    @Test
    void noncesAreFresh() {
        assertThat(SecretProof.nonce(16)).hasSize(16).isNotEqualTo(SecretProof.nonce(16));
    }
}
