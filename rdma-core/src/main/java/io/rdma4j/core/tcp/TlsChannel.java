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
 * reading (TLS 1.3 key updates) are wrapped under the writer's lock. A bulk transfer costs a system call per
 * {@link #BULK_RECORDS} records each way, not one per record: the writer wraps that many before it writes, and the
 * reader takes that many from one socket read, unwrapping them straight into the destination when it has room.
 * The buffers grow to that size only on connections that move bulk data.
 */
final class TlsChannel implements FrameChannel {

    /** The exporter label of RFC 8446 section 7.5 that binds the shared-secret proofs to this TLS session. */
    private static final String EXPORTER_LABEL = "EXPORTER-rdma4j-tcp-auth";
    private static final ByteBuffer[] NOTHING = {ByteBuffer.allocate(0)};
    /** Records written per socket write, and read per socket read, at most. */
    static final int BULK_RECORDS = 8;
    /** What {@link #unwrapRecords} returns when no record fit the destination. */
    private static final int OVERFLOW = -2;

    private final SocketChannel socket;
    private final SSLEngine engine;
    private final boolean identifiesPeers;
    private final int packetSize;
    private final int applicationSize;
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
        this.packetSize = engine.getSession().getPacketBufferSize();
        this.applicationSize = engine.getSession().getApplicationBufferSize();
        this.netIn = ByteBuffer.allocate(packetSize);
        this.appIn = ByteBuffer.allocate(applicationSize).flip();
        this.netOut = ByteBuffer.allocate(packetSize);
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

    /**
     * Reads plaintext: straight from the records into {@code dst} while it has room for a whole record and nothing
     * unwrapped is left over, else through the engine's buffer.
     */
    @Override
    public int read(ByteBuffer dst) throws IOException {
        synchronized (readLock) {
            while (!appIn.hasRemaining()) {
                int n = dst.remaining() >= applicationSize ? unwrapRecords(dst, true) : OVERFLOW;
                if (n != OVERFLOW) {
                    if (n != 0) {
                        return n;
                    }
                } else if (!unwrapOnce()) {
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
            appIn.compact();
            int n;
            try {
                n = unwrapRecords(appIn, false);
            } finally {
                appIn.flip();
            }
            if (n != OVERFLOW) {
                return n >= 0;
            }
            appIn = growReadMode(appIn, applicationSize);
        }
    }

    /**
     * Unwraps into {@code into} (write mode) one record, or with {@code many} every buffered record that fits,
     * reading from the socket only while none came out. Returns the bytes produced (0 after a record that carried
     * none, such as a session ticket), -1 at the end of the stream, or {@link #OVERFLOW} when no record fit.
     */
    private int unwrapRecords(ByteBuffer into, boolean many) throws IOException {
        int produced = 0;
        boolean unwrapped = false;
        while (true) {
            netIn.flip();
            SSLEngineResult r;
            try {
                r = engine.unwrap(netIn, into);
            } finally {
                netIn.compact();
            }
            switch (r.getStatus()) {
                case OK -> {
                    produced += r.bytesProduced();
                    unwrapped = true;
                    afterUnwrap(r.getHandshakeStatus());
                    if (!many || into.remaining() < applicationSize || netIn.position() == 0
                            || engine.getHandshakeStatus() != SSLEngineResult.HandshakeStatus.NOT_HANDSHAKING) {
                        return produced;
                    }
                }
                case BUFFER_UNDERFLOW -> {
                    if (unwrapped) {
                        return produced;
                    }
                    if (!readRecords()) {
                        return -1;
                    }
                }
                case BUFFER_OVERFLOW -> {
                    return unwrapped ? produced : OVERFLOW;
                }
                case CLOSED -> {
                    return unwrapped ? produced : -1;
                }
            }
        }
    }

    /**
     * Reads ciphertext from the socket, blocking; a read that fills the buffer means bulk data flows, and the buffer
     * grows to take {@link #BULK_RECORDS} records at once. False at the end of the stream.
     */
    private boolean readRecords() throws IOException {
        if (!netIn.hasRemaining()) {
            netIn = grow(netIn, packetSize);
        }
        if (socket.read(netIn) < 0) {
            return false;
        }
        if (!netIn.hasRemaining() && netIn.capacity() < BULK_RECORDS * packetSize) {
            netIn = grow(netIn, BULK_RECORDS * packetSize - netIn.position());
        }
        return true;
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

    /**
     * Wraps and writes at least one record (or the engine's own message when {@code srcs} is empty): as many as
     * {@link #netOut} holds, in one socket write. It grows to {@link #BULK_RECORDS} records once a write has more
     * than one record's worth.
     */
    private long wrap(ByteBuffer[] srcs) throws IOException {
        synchronized (writeLock) {
            long consumed = 0;
            netOut.clear();
            while (true) {
                SSLEngineResult r = engine.wrap(srcs, netOut);
                switch (r.getStatus()) {
                    case OK -> {
                        consumed += r.bytesConsumed();
                        if (r.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NEED_TASK) {
                            runTasks();
                        }
                    }
                    case BUFFER_OVERFLOW -> {
                        if (netOut.position() == 0) {
                            netOut = ByteBuffer.allocate(netOut.capacity() * 2);
                        } else {
                            writeNetOut();
                        }
                        continue;
                    }
                    case CLOSED -> throw new ClosedChannelException();
                    case BUFFER_UNDERFLOW -> throw new IllegalStateException("wrap reported an underflow");
                }
                if (srcs == NOTHING || !remaining(srcs)) {
                    break;
                }
                if (netOut.remaining() < packetSize) {
                    if (netOut.capacity() < BULK_RECORDS * packetSize) {
                        netOut = ByteBuffer.allocate(BULK_RECORDS * packetSize).put(netOut.flip());
                    } else {
                        writeNetOut();
                    }
                }
            }
            writeNetOut();
            return consumed;
        }
    }

    /** Writes what {@link #netOut} holds, blocking, and clears it. */
    private void writeNetOut() throws IOException {
        netOut.flip();
        while (netOut.hasRemaining()) {
            socket.write(netOut);
        }
        netOut.clear();
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
