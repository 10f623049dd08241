package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import javax.net.ssl.ExtendedSSLSession;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLPeerUnverifiedException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SocketChannel;
import java.util.Optional;

/**
 * TLS over a blocking socket through the JDK's {@link SSLEngine}: the reader thread unwraps, the writer thread
 * wraps, each under its own lock (the engine allows both at once). Messages the engine must answer while
 * reading (TLS 1.3 key updates) are wrapped under the writer's lock.
 */
final class TlsChannel implements FrameChannel {

    /** The exporter label of RFC 8446 section 7.5 that binds the shared-secret proofs to this TLS session. */
    private static final String EXPORTER_LABEL = "EXPORTER-rdma4j-tcp-auth";
    private static final ByteBuffer[] NOTHING = {ByteBuffer.allocate(0)};

    private final SocketChannel socket;
    private final SSLEngine engine;
    private final boolean identifiesPeers;
    private final Object readLock = new Object();
    private final Object writeLock = new Object();
    /** Ciphertext read from the socket and not yet unwrapped (write mode). */
    private ByteBuffer netIn;
    /** Plaintext unwrapped and not yet read (read mode). */
    private ByteBuffer appIn;
    /** Ciphertext to write. */
    private ByteBuffer netOut;

    /** {@code identifiesPeers}: whether a verified peer certificate names the peer (not so with ephemeral ones). */
    TlsChannel(SocketChannel socket, SSLEngine engine, boolean identifiesPeers) {
        this.socket = socket;
        this.engine = engine;
        this.identifiesPeers = identifiesPeers;
        int packet = engine.getSession().getPacketBufferSize();
        this.netIn = ByteBuffer.allocate(packet);
        this.appIn = ByteBuffer.allocate(engine.getSession().getApplicationBufferSize()).flip();
        this.netOut = ByteBuffer.allocate(packet);
    }

    /** Runs the TLS handshake; certificate failures surface as {@link SSLException}. */
    void handshake() throws IOException {
        engine.beginHandshake();
        while (true) {
            switch (engine.getHandshakeStatus()) {
                case NEED_WRAP -> wrap(NOTHING);
                case NEED_UNWRAP, NEED_UNWRAP_AGAIN -> {
                    synchronized (readLock) {
                        if (!unwrapOnce()) {
                            throw new ConnectionClosedException("the peer closed the connection during the TLS handshake");
                        }
                    }
                }
                case NEED_TASK -> runTasks();
                case FINISHED, NOT_HANDSHAKING -> {
                    return;
                }
            }
        }
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        synchronized (readLock) {
            while (!appIn.hasRemaining()) {
                if (!unwrapOnce()) {
                    return -1;
                }
            }
            int n = Math.min(dst.remaining(), appIn.remaining());
            dst.put(appIn.slice(appIn.position(), n));
            appIn.position(appIn.position() + n);
            return n;
        }
    }

    @Override
    public long write(ByteBuffer[] srcs) throws IOException {
        return wrap(srcs);
    }

    @Override
    public Optional<String> peerPrincipal() {
        if (!identifiesPeers) {
            return Optional.empty();
        }
        try {
            return Optional.of(engine.getSession().getPeerPrincipal().getName());
        } catch (SSLPeerUnverifiedException e) {
            return Optional.empty(); // a connecting side that presented no certificate (tcp.tls.client-auth=none)
        }
    }

    @Override
    public byte[] binding() {
        try {
            return ((ExtendedSSLSession) engine.getSession()).exportKeyingMaterialData(EXPORTER_LABEL, new byte[0], 32);
        } catch (SSLException | ClassCastException | UnsupportedOperationException e) {
            throw new IllegalStateException("the TLS session exports no keying material (TLS 1.3 is required): " + e, e);
        }
    }

    /** Unwraps one record into {@link #appIn}, reading from the socket as needed; false at the end of the stream. */
    private boolean unwrapOnce() throws IOException {
        while (true) {
            netIn.flip();
            appIn.compact();
            SSLEngineResult r;
            try {
                r = engine.unwrap(netIn, appIn);
            } finally {
                appIn.flip();
                netIn.compact();
            }
            switch (r.getStatus()) {
                case OK -> {
                    afterUnwrap(r.getHandshakeStatus());
                    return true;
                }
                case BUFFER_UNDERFLOW -> {
                    if (!netIn.hasRemaining()) {
                        netIn = grow(netIn, engine.getSession().getPacketBufferSize());
                    }
                    if (socket.read(netIn) < 0) {
                        return false;
                    }
                }
                case BUFFER_OVERFLOW -> appIn = growReadMode(appIn, engine.getSession().getApplicationBufferSize());
                case CLOSED -> {
                    return false;
                }
            }
        }
    }

    private void afterUnwrap(SSLEngineResult.HandshakeStatus status) throws IOException {
        if (status == SSLEngineResult.HandshakeStatus.NEED_TASK) {
            runTasks();
            status = engine.getHandshakeStatus();
        }
        if (status == SSLEngineResult.HandshakeStatus.NEED_WRAP && engine.getHandshakeStatus() == status) {
            // a post-handshake message to answer (TLS 1.3 key update); during the handshake its loop does it
            wrap(NOTHING);
        }
    }

    /** Wraps and writes at least one record (or the engine's own message when {@code srcs} is empty). */
    private long wrap(ByteBuffer[] srcs) throws IOException {
        synchronized (writeLock) {
            long consumed = 0;
            do {
                netOut.clear();
                SSLEngineResult r = engine.wrap(srcs, netOut);
                switch (r.getStatus()) {
                    case OK -> {
                        netOut.flip();
                        while (netOut.hasRemaining()) {
                            socket.write(netOut);
                        }
                        consumed += r.bytesConsumed();
                        if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_TASK) {
                            runTasks();
                        }
                    }
                    case BUFFER_OVERFLOW -> netOut = ByteBuffer.allocate(netOut.capacity() * 2);
                    case CLOSED -> throw new ClosedChannelException();
                    case BUFFER_UNDERFLOW -> throw new IllegalStateException("wrap reported an underflow");
                }
                if (srcs == NOTHING) {
                    return 0;
                }
            } while (consumed == 0 && remaining(srcs));
            return consumed;
        }
    }

    private static boolean remaining(ByteBuffer[] srcs) {
        for (ByteBuffer b : srcs) {
            if (b.hasRemaining()) {
                return true;
            }
        }
        return false;
    }

    private void runTasks() {
        Runnable task;
        while ((task = engine.getDelegatedTask()) != null) {
            task.run();
        }
    }

    /** A larger buffer in write mode holding what {@code b} (write mode) held. */
    private static ByteBuffer grow(ByteBuffer b, int atLeast) {
        ByteBuffer bigger = ByteBuffer.allocate(Math.max(b.capacity() * 2, b.position() + atLeast));
        return bigger.put(b.flip());
    }

    /** A larger buffer in read mode holding what {@code b} (read mode) held. */
    private static ByteBuffer growReadMode(ByteBuffer b, int atLeast) {
        ByteBuffer bigger = ByteBuffer.allocate(Math.max(b.capacity() * 2, b.remaining() + atLeast));
        return bigger.put(b).flip();
    }
}
