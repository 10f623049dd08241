package io.rdma4j.core.verbs;

import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The verbs proof exchange without a device: who must prove what, what a mismatch says, and what a received message
 * means before and after the peer proved the secret. The lab's VerbsAuthGuestTest runs it over rxe0 and siw0.
 */
class ProofExchangeTest {

    private static final Optional<String> SECRET = Optional.of("a secret of 16+ bytes");
    private static final String PEER = "/10.0.0.2:7471";

    @Test
    void bothSidesProveTheSameSecret() {
        ProofExchange connector = new ProofExchange(SECRET, true);
        ProofExchange listener = new ProofExchange(SECRET, false);
        AtomicInteger handedOver = new AtomicInteger();
        listener.accepting(peerOf(connector), PEER, handedOver::incrementAndGet);
        assertThat(connector.mismatch(peerOf(listener), PEER)).isNull();

        assertThat(listener.check(proof(connector.ownProof()), PEER)).isTrue();
        listener.succeeded();
        assertThat(handedOver).as("the proof came before the listener handled ESTABLISHED").hasValue(0);
        listener.established(Duration.ofMinutes(1), PEER, e -> handedOver.addAndGet(100));
        assertThat(handedOver).as("handed over once both happened").hasValue(1);
        assertThat(connector.check(proof(listener.ownProof()), PEER)).isTrue();
        connector.succeeded();
        assertThat(connector.awaitPeer(System.nanoTime(), PEER)).isNull();
        // after the exchange, messages pass and a further proof breaks the protocol
        assertThat(listener.check(data(), PEER)).isFalse();
        assertThatThrownBy(() -> listener.check(proof(connector.ownProof()), PEER)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("after authentication");
    }

    @Test
    void theListenerHandsOverOnceWhenTheProofComesAfterEstablished() {
        ProofExchange connector = new ProofExchange(SECRET, true);
        ProofExchange listener = new ProofExchange(SECRET, false);
        AtomicInteger handedOver = new AtomicInteger();
        listener.accepting(peerOf(connector), PEER, handedOver::incrementAndGet);
        assertThat(connector.mismatch(peerOf(listener), PEER)).isNull();
        listener.established(Duration.ofMinutes(1), PEER, e -> handedOver.addAndGet(100));
        assertThat(handedOver).as("no proof yet").hasValue(0);
        assertThat(listener.check(proof(connector.ownProof()), PEER)).isTrue();
        listener.succeeded();
        assertThat(handedOver).hasValue(1);
    }

    @Test
    void aWrongSecretShortProofOrReflectedProofIsRefused() {
        ProofExchange listener = listenerFacing(new ProofExchange(SECRET, true));
        ProofExchange impostor = new ProofExchange(Optional.of("another secret, 16+ bytes"), true);
        ProofExchange real = new ProofExchange(SECRET, true);
        ProofExchange l2 = listenerFacing(real);
        assertThatThrownBy(() -> listenerFacing(impostor).check(proof(impostor.ownProof()), PEER))
                .as("wrong secret").isInstanceOf(AuthenticationException.class)
                .hasMessageContaining("failed to prove the shared secret").hasMessageContaining("configure the same shared-secret");
        assertThatThrownBy(() -> l2.check(proof(Arrays.copyOf(real.ownProof(), 16)), PEER)).as("short proof")
                .isInstanceOf(AuthenticationException.class);
        assertThatThrownBy(() -> l2.check(proof(new byte[0]), PEER)).as("empty proof").isInstanceOf(AuthenticationException.class);
        // the listener's own proof sent back to it
        assertThatThrownBy(() -> listener.check(proof(listener.ownProof()), PEER)).as("reflected proof")
                .isInstanceOf(AuthenticationException.class);
    }

    @Test
    void aProofForTheWrongRoleIsRefused() {
        // a connector that is sent the connector's proof (its own, reflected) instead of the listener's
        ProofExchange connector = new ProofExchange(SECRET, true);
        ProofExchange listener = listenerFacing(connector);
        connector.mismatch(peerOf(listener), PEER);
        assertThatThrownBy(() -> connector.check(proof(connector.ownProof()), PEER)).isInstanceOf(AuthenticationException.class);
    }

    @Test
    void dataBeforeTheProofBreaksTheProtocol() {
        ProofExchange listener = listenerFacing(new ProofExchange(SECRET, true));
        assertThatThrownBy(() -> listener.check(data(), PEER)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("before proving the shared secret");
        assertThatThrownBy(() -> listener.check(new MessageChannel.Received(1, null, false), PEER))
                .as("a credit-only message").isInstanceOf(ProtocolException.class);
    }

    @Test
    void withoutASecretMessagesPassAndProofsBreakTheProtocol() {
        ProofExchange plain = new ProofExchange(Optional.empty(), false);
        AtomicInteger handedOver = new AtomicInteger();
        plain.accepting(new ConnectData.PeerParameters(4096, 8, null), PEER, handedOver::incrementAndGet);
        assertThat(plain.required()).isFalse();
        assertThat(plain.ownNonce()).isNull();
        plain.established(java.time.Duration.ofSeconds(1), PEER, e -> {
            throw new AssertionError(e);
        });
        assertThat(handedOver).hasValue(1);
        assertThat(plain.check(data(), PEER)).isFalse();
        assertThatThrownBy(() -> plain.check(proof(new byte[32]), PEER)).isInstanceOf(ProtocolException.class);
        assertThat(plain.prove(new ReentrantLock(), null, 0, PEER)).isNull();
    }

    @Test
    void aSecretOnOneSideOnlyFailsNamingWhatToConfigure() {
        ProofExchange withSecret = new ProofExchange(SECRET, true);
        ProofExchange without = new ProofExchange(Optional.empty(), true);
        assertThat(withSecret.mismatch(new ConnectData.PeerParameters(4096, 8, null), PEER))
                .isInstanceOf(AuthenticationException.class).hasMessageContaining("has no shared secret configured")
                .hasMessageContaining("configure the same shared-secret on both sides");
        assertThat(without.mismatch(peerOf(new ProofExchange(SECRET, false)), PEER))
                .isInstanceOf(AuthenticationException.class).hasMessageContaining("requires a shared secret")
                .hasMessageContaining("configure the same shared-secret on this side");
        // the listener side closes such a peer once ESTABLISHED, and never hands it over
        ProofExchange listener = new ProofExchange(SECRET, false);
        AtomicInteger handedOver = new AtomicInteger();
        listener.accepting(new ConnectData.PeerParameters(4096, 8, null), PEER, handedOver::incrementAndGet);
        AuthenticationException[] rejected = new AuthenticationException[1];
        listener.established(java.time.Duration.ofSeconds(1), PEER, e -> rejected[0] = e);
        assertThat(rejected[0]).hasMessageContaining("has no shared secret configured");
        assertThat(handedOver).hasValue(0);
    }

    @Test
    void aPeerThatNeverProvesIsRejectedAfterTheTimeoutUnlessClosedFirst() throws Exception {
        ProofExchange listener = listenerFacing(new ProofExchange(SECRET, true));
        java.util.concurrent.CompletableFuture<AuthenticationException> rejected = new java.util.concurrent.CompletableFuture<>();
        listener.established(java.time.Duration.ofMillis(50), PEER, rejected::complete);
        assertThat(rejected.get(10, java.util.concurrent.TimeUnit.SECONDS)).hasMessageContaining("sent no proof")
                .hasMessageContaining("connect-timeout");

        ProofExchange closed = listenerFacing(new ProofExchange(SECRET, true));
        java.util.concurrent.CompletableFuture<AuthenticationException> notRejected = new java.util.concurrent.CompletableFuture<>();
        closed.established(java.time.Duration.ofMillis(50), PEER, notRejected::complete);
        closed.closed(new ConnectionClosedException("gone"));
        Thread.sleep(300);
        assertThat(notRejected).isNotDone();
    }

    @Test
    void theConnectorGetsAnAuthenticationExceptionWhenTheListenerClosesFirst() {
        ProofExchange connector = new ProofExchange(SECRET, true);
        connector.mismatch(peerOf(new ProofExchange(SECRET, false)), PEER);
        connector.closed(new ConnectionClosedException("connection to " + PEER + " ended: RDMA_CM_EVENT_DISCONNECTED"));
        AuthenticationException failure = connector.awaitPeer(System.nanoTime() + 1_000_000_000L, PEER);
        assertThat(failure).hasMessageContaining("closed the connection instead of proving the shared secret")
                .hasMessageContaining("configure the same shared-secret").hasCauseInstanceOf(ConnectionClosedException.class);
        ProofExchange silent = new ProofExchange(SECRET, true);
        silent.mismatch(peerOf(new ProofExchange(SECRET, false)), PEER);
        assertThat(silent.awaitPeer(System.nanoTime() + 50_000_000L, PEER)).hasMessageContaining("sent no proof");
        ProofExchange wrong = new ProofExchange(SECRET, true);
        wrong.closed(new AuthenticationException(PEER + " failed to prove the shared secret"));
        assertThat(wrong.awaitPeer(System.nanoTime(), PEER)).hasMessageContaining("failed to prove");
    }

    // ---- helpers ----

    private static ProofExchange listenerFacing(ProofExchange connector) {
        ProofExchange listener = new ProofExchange(SECRET, false);
        listener.accepting(peerOf(connector), PEER, () -> { });
        connector.mismatch(peerOf(listener), PEER);
        return listener;
    }

    private static ConnectData.PeerParameters peerOf(ProofExchange side) {
        return ConnectData.peer(ConnectData.privateData(4096, 8, side.ownNonce()));
    }

    private static MessageChannel.Received proof(byte[] bytes) {
        return new MessageChannel.Received(0, ByteBuffer.wrap(bytes), true);
    }

    private static MessageChannel.Received data() {
        return new MessageChannel.Received(0, ByteBuffer.wrap(new byte[] {1, 2, 3}), false);
    }
}
