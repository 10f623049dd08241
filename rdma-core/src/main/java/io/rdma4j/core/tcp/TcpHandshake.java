package io.rdma4j.core.tcp;

import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.internal.auth.SecretProof;

import javax.net.ssl.SSLException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.Arrays;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The connection handshake: both sides send a hello (magic, version, flags, nonce); with a shared
 * secret each then proves knowledge of it with HMAC-SHA256 over both nonces (bound to its role, so a
 * proof cannot be reflected back). The connecting side proves first; the listener proves itself only to
 * a peer whose proof it accepted.
 */
final class TcpHandshake {

    private static final byte ACCEPTED = 1;
    private static final byte REJECTED = 0;
    private static final byte CONNECTOR = SecretProof.CONNECTOR;
    private static final byte LISTENER = SecretProof.LISTENER;
    /** Binds a proof to this protocol: a proof made for the verbs provider's handshake does not verify here. */
    private static final String LABEL = "rdma4j-tcp-auth-v1";

    private TcpHandshake() {
    }

    /** Refuses a configured secret (empty included) shorter than {@value SecretProof#MIN_SECRET_BYTES} bytes. */
    static void checkSecret(String secret) {
        SecretProof.checkSecret(secret);
    }

    /**
     * Runs the handshake on a connected blocking socket within {@code timeout}, first TLS when {@code tls} is
     * given; returns the channel the connection's frames use. Closes nothing on success.
     */
    static FrameChannel run(SocketChannel channel, boolean connecting, Optional<String> secret, TcpTls tls,
                            Duration timeout, ScheduledExecutorService timers, InetSocketAddress peerAddress) {
        String peer = String.valueOf(peerAddress);
        AtomicBoolean expired = new AtomicBoolean();
        ScheduledFuture<?> watchdog = timers.schedule(() -> {
            expired.set(true);
            try {
                channel.close();
            } catch (IOException ignored) {
                // closing only to abort the blocked handshake
            }
        }, timeout.toNanos(), TimeUnit.NANOSECONDS);
        FrameChannel frames;
        try {
            if (tls == null) {
                frames = FrameChannel.plain(channel);
            } else {
                TlsChannel secured = new TlsChannel(channel, tls.engine(connecting, peerAddress), tls.identifiesPeers());
                secured.handshake();
                frames = secured;
            }
            exchange(frames, connecting, secret, peer);
        } catch (SSLException e) {
            if (expired.get()) {
                throw new RdmaTimeoutException("handshake with " + peer + " did not finish within " + timeout);
            }
            AuthenticationException failure = new AuthenticationException("TLS handshake with " + peer + " failed: "
                    + e.getMessage() + "; check tcp.tls on both sides, the certificates and the trust stores");
            failure.initCause(e);
            throw failure;
        } catch (IOException e) {
            if (expired.get()) {
                throw new RdmaTimeoutException("handshake with " + peer + " did not finish within " + timeout);
            }
            throw new ConnectionClosedException("handshake with " + peer + " failed: " + e.getMessage(), e);
        } catch (RdmaException e) {
            if (expired.get()) {
                throw new RdmaTimeoutException("handshake with " + peer + " did not finish within " + timeout);
            }
            throw e;
        } finally {
            watchdog.cancel(false);
        }
        if (expired.get()) {
            throw new RdmaTimeoutException("handshake with " + peer + " did not finish within " + timeout);
        }
        return frames;
    }

    private static void exchange(FrameChannel channel, boolean connecting, Optional<String> secret, String peer)
            throws IOException {
        byte[] ownNonce = SecretProof.nonce(TcpFrameCodec.NONCE_SIZE);
        writeFully(channel, TcpFrameCodec.encodeHello(secret.isPresent() ? TcpFrameCodec.FLAG_AUTH : 0, ownNonce));

        ByteBuffer prefix = ByteBuffer.allocate(TcpFrameCodec.HELLO_PREFIX_SIZE);
        readFully(channel, prefix, peer);
        int peerFlags = TcpFrameCodec.decodeHelloPrefix(prefix.flip());
        byte[] peerNonce = new byte[TcpFrameCodec.NONCE_SIZE];
        readFully(channel, ByteBuffer.wrap(peerNonce), peer);
        if (Arrays.equals(peerNonce, ownNonce)) {
            // 16 random bytes come back only from a peer that echoes what it reads: a plain echo service
            throw new ProtocolException(peer + " echoed this side's hello: it is not an rdma4j tcp endpoint");
        }

        boolean peerWantsAuth = (peerFlags & TcpFrameCodec.FLAG_AUTH) != 0;
        if (secret.isEmpty()) {
            if (peerWantsAuth) {
                throw new AuthenticationException(peer + " requires a shared secret; configure the same shared-secret on this side");
            }
            return;
        }
        if (!peerWantsAuth) {
            throw new AuthenticationException(peer + " has no shared secret configured but this side requires one;"
                    + " configure the same shared-secret on both sides");
        }
        if (connecting) {
            proveThenVerify(channel, secret.get(), ownNonce, peerNonce, peer);
        } else {
            verifyThenProve(channel, secret.get(), ownNonce, peerNonce, peer);
        }
    }

    /**
     * The connecting side proves first. It learns the listener's verdict, and only after an acceptance the
     * listener's proof, which it checks and answers with its own verdict.
     */
    private static void proveThenVerify(FrameChannel channel, String secret, byte[] ownNonce, byte[] peerNonce,
                                        String peer) throws IOException {
        writeFully(channel, ByteBuffer.wrap(proof(secret, CONNECTOR, ownNonce, peerNonce, channel.binding())));
        ByteBuffer verdict = ByteBuffer.allocate(1);
        readFully(channel, verdict, peer);
        if (verdict.get(0) != ACCEPTED) {
            throw new AuthenticationException(peer + " rejected this side's shared secret; configure the same shared-secret on both sides");
        }
        byte[] peerProof = new byte[TcpFrameCodec.PROOF_SIZE];
        readFully(channel, ByteBuffer.wrap(peerProof), peer);
        boolean peerOk = SecretProof.verify(peerProof, LABEL, secret, LISTENER, peerNonce, ownNonce, channel.binding());
        writeFully(channel, ByteBuffer.wrap(new byte[] {peerOk ? ACCEPTED : REJECTED}));
        if (!peerOk) {
            throw new AuthenticationException(peer + " failed to prove the shared secret; configure the same shared-secret on both sides");
        }
    }

    /**
     * The listener checks the connecting side's proof before it proves anything itself, so a peer without the
     * secret never gets a proof to guess the secret from offline.
     */
    private static void verifyThenProve(FrameChannel channel, String secret, byte[] ownNonce, byte[] peerNonce,
                                        String peer) throws IOException {
        byte[] peerProof = new byte[TcpFrameCodec.PROOF_SIZE];
        readFully(channel, ByteBuffer.wrap(peerProof), peer);
        if (!SecretProof.verify(peerProof, LABEL, secret, CONNECTOR, peerNonce, ownNonce, channel.binding())) {
            writeFully(channel, ByteBuffer.wrap(new byte[] {REJECTED}));
            throw new AuthenticationException(peer + " failed to prove the shared secret; configure the same shared-secret on both sides");
        }
        writeFully(channel, ByteBuffer.allocate(1 + TcpFrameCodec.PROOF_SIZE).put(ACCEPTED)
                .put(proof(secret, LISTENER, ownNonce, peerNonce, channel.binding())).flip());
        ByteBuffer verdict = ByteBuffer.allocate(1);
        readFully(channel, verdict, peer);
        if (verdict.get(0) != ACCEPTED) {
            throw new AuthenticationException(peer + " rejected this side's shared secret; configure the same shared-secret on both sides");
        }
    }

    /**
     * {@link SecretProof#proof} under this protocol's label. Under TLS the binding is the session's exported keying
     * material, so a proof relayed into another TLS session does not verify.
     */
    static byte[] proof(String secret, byte role, byte[] proverNonce, byte[] verifierNonce, byte[] binding) {
        return SecretProof.proof(LABEL, secret, role, proverNonce, verifierNonce, binding);
    }

    static void writeFully(FrameChannel channel, ByteBuffer buffer) throws IOException {
        ByteBuffer[] one = {buffer};
        while (buffer.hasRemaining()) {
            channel.write(one);
        }
    }

    static void readFully(FrameChannel channel, ByteBuffer buffer, String peer) throws IOException {
        while (buffer.hasRemaining()) {
            if (channel.read(buffer) < 0) {
                throw new ConnectionClosedException(peer + " closed the connection");
            }
        }
    }
}
