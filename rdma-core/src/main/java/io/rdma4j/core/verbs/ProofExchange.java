package io.rdma4j.core.verbs;

import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.internal.auth.SecretProof;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * One connection's proof of the shared secret ({@code shared-secret}). With a secret, each side sends a fresh
 * nonce in its connect private data ({@link ConnectData#privateData(int, int, byte[])}, version 2, flag
 * {@link MessageChannel#CONNECT_FLAG_AUTH}); after ESTABLISHED the connecting side's first message is its proof
 * ({@link SecretProof}: HMAC-SHA256 over both nonces, bound to its role), in a slot flagged
 * {@link MessageChannel#FLAG_PROOF}. The listener checks it before it delivers anything from the peer or hands the
 * connection to the application, and only then sends its own proof, which the connecting side checks before
 * {@code connect} returns. Anything but a proof before the exchange passed, and any proof after, breaks the protocol.
 * A side with a secret and a peer without one (or the reverse) fail with an {@link AuthenticationException} that
 * names what to configure.
 *
 * <p>Remote one-sided access needs an rkey, and rkeys are disclosed only over the control channel (region
 * descriptors in messages and replies), which this exchange gates: a peer that has not proven the secret receives no
 * message at all. A peer guessing or forging an rkey instead gets a remote access error, which moves the RC queue
 * pair to the error state and ends the connection (a NIC checks the rkey, range and rights of every request).
 *
 * <p>The proof binds no channel: like tcp without TLS, it authenticates the peer, not the path, so it does not stop a
 * relay on the network between the two sides.
 */
final class ProofExchange {

    /** Binds a proof to this protocol: a proof made for the tcp provider's handshake does not verify here. */
    private static final String LABEL = "rdma4j-verbs-auth-v1";
    private static final byte[] NO_BINDING = new byte[0];

    private final String secret;
    private final boolean connecting;
    private final byte[] ownNonce;
    private final CompletableFuture<Void> passed = new CompletableFuture<>();
    /** Passive side: hands the connection to the listener; why a peer that disagrees on authentication is closed. */
    private Runnable handOver;
    private AuthenticationException refusal;
    /**
     * Passive side with a secret: what the hand-over still waits for, ESTABLISHED handled and the peer's proof
     * accepted. The proof can come first: the connecting side sends it once its own ESTABLISHED arrived, and the
     * listener's queue pair receives from the moment it accepted, before its CM event is handled. Whichever comes
     * second hands over, so the application never gets a connection that cannot send yet.
     */
    private final AtomicInteger handOverAwaits = new AtomicInteger(2);
    // guarded by the connection's lock
    private byte[] peerNonce;
    private boolean done;

    ProofExchange(Optional<String> secret, boolean connecting) {
        this.secret = secret.orElse(null);
        this.connecting = connecting;
        this.ownNonce = this.secret == null ? null : SecretProof.nonce(ConnectData.NONCE_BYTES);
        this.done = this.secret == null;
    }

    /** This side's nonce for its private data; null without a secret. */
    byte[] ownNonce() {
        return ownNonce;
    }

    /** Whether this side proves and checks a proof (it has a secret). */
    boolean required() {
        return secret != null;
    }

    /**
     * The peer's private data read: null when both sides agree on authentication, else why they cannot talk
     * (one side has a secret, the other none).
     */
    AuthenticationException mismatch(ConnectData.PeerParameters peer, String who) {
        if (secret == null && peer.authenticates()) {
            return new AuthenticationException(who + " requires a shared secret; configure the same shared-secret on this side");
        }
        if (secret != null && !peer.authenticates()) {
            return new AuthenticationException(who + " has no shared secret configured (or runs an rdma4j too old to"
                    + " authenticate on verbs) but this side requires one; configure the same shared-secret on both sides");
        }
        peerNonce = peer.nonce();
        return null;
    }

    /** Passive side, under the connection's lock: the connect request read; {@code handOver} runs once it may. */
    void accepting(ConnectData.PeerParameters peer, String who, Runnable handOver) {
        this.refusal = mismatch(peer, who);
        this.handOver = handOver;
    }

    /**
     * Passive side, once ESTABLISHED and attached: hands the connection over when no proof is due, {@code reject}s
     * a peer that disagrees on authentication, else {@code reject}s the peer unless it proved the secret within
     * {@code timeout}.
     */
    void established(Duration timeout, String who, Consumer<AuthenticationException> reject) {
        if (refusal != null) {
            reject.accept(refusal);
        } else if (secret == null) {
            handOver.run();
        } else {
            readyToHandOver();
            CompletableFuture.delayedExecutor(timeout.toNanos(), TimeUnit.NANOSECONDS).execute(() -> {
                if (!passed.isDone()) { // neither proven nor closed
                    reject.accept(new AuthenticationException(who + " sent no proof of the shared secret within "
                            + timeout + " (connect-timeout); configure the same shared-secret on both sides"));
                }
            });
        }
    }

    /** Under the connection's lock, the peer's proof just accepted: the passive side proves itself in turn. */
    void answer(MessageChannel messages) {
        if (handOver != null) {
            messages.sendProof(ownProof());
        }
    }

    /** This side's proof, sent as its first message. */
    byte[] ownProof() {
        return SecretProof.proof(LABEL, secret, connecting ? SecretProof.CONNECTOR : SecretProof.LISTENER, ownNonce,
                peerNonce, NO_BINDING);
    }

    /**
     * Under the connection's lock: checks {@code received} against the exchange. Returns true when it is the peer's
     * valid proof (the exchange has just passed), false when it is a message to handle as usual.
     *
     * @throws ProtocolException       when it is a message before the proof, or a proof after it
     * @throws AuthenticationException when it is a wrong proof
     */
    boolean check(MessageChannel.Received received, String who) {
        if (done) {
            if (received.proof()) {
                throw new ProtocolException(who + " sent a proof of the shared secret after authentication:"
                        + " not an rdma4j verbs peer, or a corrupted one");
            }
            return false;
        }
        if (!received.proof()) {
            throw new ProtocolException(who + " sent a message before proving the shared secret:"
                    + " not an rdma4j verbs peer, or a corrupted one");
        }
        if (refusal != null) {
            throw refusal; // it announced no nonce: there is nothing to check its proof against
        }
        ByteBuffer p = received.payload();
        byte[] proof = new byte[p.remaining()];
        p.get(p.position(), proof);
        byte peerRole = connecting ? SecretProof.LISTENER : SecretProof.CONNECTOR;
        if (!SecretProof.verify(proof, LABEL, secret, peerRole, peerNonce, ownNonce, NO_BINDING)) {
            throw new AuthenticationException(who + " failed to prove the shared secret; configure the same"
                    + " shared-secret on both sides");
        }
        done = true;
        passed.complete(null); // under the lock, so the passive side's timeout cannot fire in between
        return true;
    }

    /**
     * Active side, attached: sends this side's proof (under {@code lock}), then waits until {@code deadlineNanos}
     * for the listener's. Returns null once it was accepted (or without a secret), else why not: no proof in time, a
     * wrong one, or the connection closed first (the listener refused this side's proof, or the protocol broke).
     */
    AuthenticationException prove(ReentrantLock lock, MessageChannel messages, long deadlineNanos, String who) {
        if (secret == null) {
            return null;
        }
        lock.lock();
        try {
            messages.sendProof(ownProof());
        } finally {
            lock.unlock();
        }
        return awaitPeer(deadlineNanos, who);
    }

    /** Active side: {@link #prove}'s wait for the listener's proof. */
    AuthenticationException awaitPeer(long deadlineNanos, String who) {
        try {
            passed.get(Math.max(0, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
            return null;
        } catch (TimeoutException e) {
            return new AuthenticationException(who + " sent no proof of the shared secret within the connect-timeout;"
                    + " configure the same shared-secret on both sides");
        } catch (ExecutionException e) {
            if (e.getCause() instanceof AuthenticationException a) {
                return a;
            }
            AuthenticationException closed = new AuthenticationException(who + " closed the connection instead of"
                    + " proving the shared secret (it refused this side's proof, or the protocol broke: "
                    + e.getCause().getMessage() + "); configure the same shared-secret on both sides");
            closed.initCause(e.getCause());
            return closed;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new AuthenticationException("interrupted while waiting for " + who + " to prove the shared secret");
        }
    }

    /**
     * Without the connection's lock, the peer's proof accepted: the passive side hands the connection over, once
     * ESTABLISHED was handled too.
     */
    void succeeded() {
        if (handOver != null) {
            readyToHandOver();
        }
    }

    private void readyToHandOver() {
        if (handOverAwaits.decrementAndGet() == 0) {
            handOver.run();
        }
    }

    /** The connection is closing: an exchange still open fails with {@code cause}. */
    void closed(RdmaException cause) {
        if (!passed.isDone()) {
            passed.completeExceptionally(cause);
        }
    }
}
