package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.core.spi.ConnectionEvents;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderRegion;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One tcp connection, symmetric: each side issues requests and serves the peer's. Exactly one reader
 * thread reads and dispatches (moving data straight from the socket into sinks and written regions),
 * and one writer thread drains a queue (streaming served reads straight from registered memory), so a
 * side never blocks reading while its peer blocks writing. Large transfers go out one chunk per turn,
 * so other frames interleave.
 */
final class TcpConnection implements ProviderConnection {

    private static final System.Logger LOG = System.getLogger(TcpConnection.class.getName());
    private static final long JOIN_MILLIS = 10_000;

    private final TcpTransport transport;
    private final SocketChannel channel;
    private final InetSocketAddress remoteAddress;
    private final InetSocketAddress localAddress;
    private final int chunkSize;
    private final int maxMessageSize;
    private final AtomicLong ids = new AtomicLong();
    private final Map<Long, Pending> pending = new ConcurrentHashMap<>();
    private final LinkedBlockingDeque<Outgoing> outgoing = new LinkedBlockingDeque<>();
    /** Peer writes being received; touched by the reader thread only (and by finish, after it stopped). */
    private final Map<Long, PeerWrite> peerWrites = new HashMap<>();
    private final Object lock = new Object();
    private final AtomicBoolean finishedOnce = new AtomicBoolean();
    private volatile boolean finished;
    private volatile RdmaException closeCause;
    private ConnectionEvents events;
    private Thread reader;
    private Thread writer;

    TcpConnection(TcpTransport transport, SocketChannel channel) throws IOException {
        this.transport = transport;
        this.channel = channel;
        this.remoteAddress = (InetSocketAddress) channel.getRemoteAddress();
        this.localAddress = (InetSocketAddress) channel.getLocalAddress();
        this.chunkSize = transport.options().chunkSize();
        this.maxMessageSize = transport.config().maxMessageSize();
    }

    @Override
    public void start(ConnectionEvents events) {
        synchronized (lock) {
            if (this.events != null) {
                throw new IllegalStateException("connection already started");
            }
            this.events = events;
            if (closeCause == null) {
                String name = "rdma4j-tcp-" + remoteAddress.getPort();
                writer = Thread.ofVirtual().name(name + "-writer").start(this::writeLoop);
                reader = Thread.ofVirtual().name(name + "-reader").start(this::readLoop);
                return;
            }
        }
        finish();
    }

    // ---- requester ----

    @Override
    public CompletableFuture<Void> read(long remoteAddress, long remoteKey, MemorySegment sink, ProviderRegion localRegion) {
        PendingRead p = new PendingRead(ids.incrementAndGet(), sink);
        if (track(p)) {
            enqueue(new Control(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, p.id, remoteAddress, sink.byteSize(), remoteKey)));
        }
        return p.future;
    }

    /** Posts the whole batch of requests with one gathering write. */
    @Override
    public List<CompletableFuture<Void>> readAll(List<ProviderRead> reads) {
        List<CompletableFuture<Void>> results = new ArrayList<>(reads.size());
        List<ByteBuffer> requests = new ArrayList<>(reads.size());
        for (ProviderRead r : reads) {
            PendingRead p = new PendingRead(ids.incrementAndGet(), r.sink());
            results.add(p.future);
            if (track(p)) {
                requests.add(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, p.id, r.remoteAddress(), r.sink().byteSize(), r.remoteKey()));
            }
        }
        if (!requests.isEmpty()) {
            enqueue(new Control(requests.toArray(ByteBuffer[]::new)));
        }
        return results;
    }

    @Override
    public CompletableFuture<Void> write(long remoteAddress, long remoteKey, MemorySegment source, ProviderRegion localRegion) {
        PendingWrite p = new PendingWrite(ids.incrementAndGet());
        if (track(p)) {
            enqueue(new OutgoingWrite(p, remoteAddress, remoteKey, source));
        }
        return p.future;
    }

    @Override
    public CompletableFuture<Void> send(ByteBuffer message) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        if (message.remaining() > maxMessageSize) {
            return CompletableFuture.failedFuture(new IllegalArgumentException("message of " + message.remaining()
                    + " bytes exceeds max-message-size " + maxMessageSize));
        }
        enqueue(new Control(done, TcpFrameCodec.encodeSendHeader(message.remaining()), message));
        return done;
    }

    /** Registers an operation; false (and the operation failed) if the connection is already finished. */
    private boolean track(Pending p) {
        pending.put(p.id, p);
        if (finished && pending.remove(p.id) != null) {
            p.fail(pendingFailure());
            return false;
        }
        return true;
    }

    private void enqueue(Outgoing o) {
        outgoing.addLast(o);
        if (finished) {
            abortQueued();
        }
    }

    // ---- writer thread ----

    private void writeLoop() {
        Outgoing current = null;
        try {
            while (true) {
                current = outgoing.takeFirst();
                if (current.writeTo(this)) {
                    outgoing.addLast(current);
                }
                current = null;
            }
        } catch (InterruptedException e) {
            // finish() stops the writer
        } catch (IOException | RuntimeException e) {
            fail(e);
        } finally {
            if (current != null) {
                current.abort(pendingFailure());
            }
            if (finished) {
                abortQueued();
            }
        }
    }

    void writeFully(ByteBuffer... buffers) throws IOException {
        long left = 0;
        for (ByteBuffer b : buffers) {
            left += b.remaining();
        }
        while (left > 0) {
            left -= channel.write(buffers);
        }
    }

    private void abortQueued() {
        Outgoing o;
        while ((o = outgoing.pollFirst()) != null) {
            o.abort(pendingFailure());
        }
    }

    // ---- reader thread ----

    private void readLoop() {
        ByteBuffer header = ByteBuffer.allocateDirect(TcpFrameCodec.HEADER_SIZE);
        ByteBuffer body = ByteBuffer.allocate(1 + TcpFrameCodec.MAX_ERROR_MESSAGE);
        try {
            while (true) {
                readFully(header.clear());
                TcpFrameCodec.Header h = TcpFrameCodec.decodeHeader(header.flip(), maxMessageSize);
                switch (h.type()) {
                    case TcpFrameCodec.READ_REQ -> serveRead(TcpFrameCodec.decodeRequest(h, readBody(body, h)));
                    case TcpFrameCodec.WRITE_REQ -> acceptWrite(TcpFrameCodec.decodeRequest(h, readBody(body, h)));
                    case TcpFrameCodec.WRITE_DATA -> receiveWriteData(h);
                    case TcpFrameCodec.READ_DATA -> receiveReadData(h);
                    case TcpFrameCodec.READ_DONE -> readDone(h.id());
                    case TcpFrameCodec.WRITE_ACK -> writeAnswered(h.id(), null);
                    case TcpFrameCodec.ERROR -> remoteError(TcpFrameCodec.decodeError(h, readBody(body, h)));
                    case TcpFrameCodec.SEND -> {
                        ByteBuffer message = ByteBuffer.allocate(h.length());
                        readFully(message);
                        events.onMessage(message.flip());
                    }
                    case TcpFrameCodec.CLOSE -> throw new ConnectionClosedException(remoteAddress + " closed the connection");
                    default -> throw new ProtocolException("unexpected frame type " + h.type());
                }
            }
        } catch (IOException | RuntimeException e) {
            fail(e);
        } finally {
            finish();
        }
    }

    private ByteBuffer readBody(ByteBuffer body, TcpFrameCodec.Header h) throws IOException {
        body.clear().limit(h.length());
        readFully(body);
        return body.flip();
    }

    private void readFully(ByteBuffer buffer) throws IOException {
        while (buffer.hasRemaining()) {
            if (channel.read(buffer) < 0) {
                throw new ConnectionClosedException(remoteAddress + " closed the connection"
                        + (pending.isEmpty() ? "" : " with " + pending.size() + " operation(s) pending"));
            }
        }
    }

    private ByteBuffer scratch;

    /** Reads and discards bytes nobody waits for any more (a failed request's data). */
    private void drain(long length) throws IOException {
        if (scratch == null) {
            scratch = ByteBuffer.allocateDirect(64 << 10);
        }
        while (length > 0) {
            scratch.clear().limit((int) Math.min(scratch.capacity(), length));
            readFully(scratch);
            length -= scratch.limit();
        }
    }

    private void serveRead(TcpFrameCodec.Request r) {
        TcpRegion region;
        try {
            region = transport.authorize(this, r.key(), r.address(), r.length(), Access.REMOTE_READ);
        } catch (RemoteAccessException e) {
            reject(r, e);
            return;
        }
        enqueue(new ServeRead(r.id(), region, r.address() - region.segment().address(), r.length()));
    }

    private void acceptWrite(TcpFrameCodec.Request r) {
        if (peerWrites.containsKey(r.id())) {
            throw new ProtocolException("peer reused write request id " + r.id());
        }
        TcpRegion region;
        try {
            region = transport.authorize(this, r.key(), r.address(), r.length(), Access.REMOTE_WRITE);
        } catch (RemoteAccessException e) {
            // Its data frames follow anyway; they are drained as belonging to no live write.
            reject(r, e);
            return;
        }
        if (r.length() == 0) {
            region.unpin(this);
            transport.metrics().recordServed(OperationType.WRITE, 0);
            enqueue(new Control(TcpFrameCodec.encodeEmpty(TcpFrameCodec.WRITE_ACK, r.id())));
            return;
        }
        peerWrites.put(r.id(), new PeerWrite(region, r.address() - region.segment().address(), r.length()));
    }

    private void receiveWriteData(TcpFrameCodec.Header h) throws IOException {
        PeerWrite w = peerWrites.get(h.id());
        if (w == null) {
            drain(h.length());
            return;
        }
        if (h.length() > w.length - w.received) {
            throw new ProtocolException("peer sent more data than its write request " + h.id() + " announced");
        }
        if (w.region.isRevoked()) {
            peerWrites.remove(h.id());
            w.region.unpin(this);
            enqueue(new Control(TcpFrameCodec.encodeError(h.id(), RemoteAccessException.Reason.RESPONDER_ERROR,
                    "the region was deregistered during the write")));
            drain(h.length());
            return;
        }
        readFully(w.region.segment().asSlice(w.offset + w.received, h.length()).asByteBuffer());
        w.received += h.length();
        if (w.received == w.length) {
            peerWrites.remove(h.id());
            w.region.unpin(this);
            transport.metrics().recordServed(OperationType.WRITE, w.length);
            enqueue(new Control(TcpFrameCodec.encodeEmpty(TcpFrameCodec.WRITE_ACK, h.id())));
        }
    }

    private void reject(TcpFrameCodec.Request r, RemoteAccessException e) {
        String what = (r.type() == TcpFrameCodec.READ_REQ ? "read" : "write") + " of " + r.length() + " bytes by "
                + remoteAddress + ": " + e.getMessage();
        transport.rejected(what);
        enqueue(new Control(TcpFrameCodec.encodeError(r.id(), e.reason(), e.getMessage())));
    }

    private void receiveReadData(TcpFrameCodec.Header h) throws IOException {
        if (pending.get(h.id()) instanceof PendingRead p && !p.future.isDone()) {
            if (h.length() > p.sink.byteSize() - p.received) {
                throw new ProtocolException("peer sent more data than read request " + h.id() + " asked for");
            }
            readFully(p.sink.asSlice(p.received, h.length()).asByteBuffer());
            p.received += h.length();
        } else {
            drain(h.length());
        }
    }

    private void readDone(long id) {
        if (pending.get(id) instanceof PendingRead p) {
            if (p.received != p.sink.byteSize()) {
                throw new ProtocolException("peer finished read request " + id + " after " + p.received + " of "
                        + p.sink.byteSize() + " bytes");
            }
            pending.remove(id);
            p.future.complete(null);
        }
    }

    private void writeAnswered(long id, RemoteAccessException error) {
        if (pending.get(id) instanceof PendingWrite p) {
            p.answer(error);
        }
    }

    private void remoteError(TcpFrameCodec.Error e) {
        RemoteAccessException failure = new RemoteAccessException(e.reason(), remoteAddress + " refused: " + e.message());
        Pending p = pending.get(e.id());
        if (p instanceof PendingWrite w) {
            w.answer(failure);
        } else if (p != null && pending.remove(e.id()) != null) {
            p.fail(failure);
        }
    }

    // ---- closing ----

    /** Records why the connection ends (first cause wins) and closes the socket, which stops both threads. */
    private void fail(Throwable t) {
        RdmaException cause;
        if (closeCause != null) {
            cause = closeCause;
        } else if (t instanceof ProtocolException p) {
            transport.rejected("protocol violation by " + remoteAddress + ": " + p.getMessage());
            cause = p;
        } else if (t instanceof RdmaException r) {
            cause = r;
        } else if (t instanceof IOException) {
            cause = new ConnectionClosedException("connection to " + remoteAddress + " failed: " + t.getMessage(), t);
        } else {
            LOG.log(System.Logger.Level.ERROR, "unexpected failure on connection to " + remoteAddress, t);
            cause = new RdmaException("connection to " + remoteAddress + " failed: " + t, t);
        }
        synchronized (lock) {
            if (closeCause == null) {
                closeCause = cause;
            }
        }
        closeChannel();
    }

    private void closeChannel() {
        try {
            channel.close();
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "closing socket to " + remoteAddress, e);
        }
    }

    private ConnectionClosedException pendingFailure() {
        RdmaException cause = closeCause;
        if (cause instanceof ConnectionClosedException c) {
            return c;
        }
        return new ConnectionClosedException("connection to " + remoteAddress + " closed"
                + (cause == null ? "" : ": " + cause.getMessage()), cause);
    }

    /** Runs once, after the reader stopped: no thread touches any sink, source or region any more. */
    private void finish() {
        if (!finishedOnce.compareAndSet(false, true)) {
            return;
        }
        closeChannel();
        Thread w;
        synchronized (lock) {
            w = writer;
        }
        if (w != null && w != Thread.currentThread()) {
            w.interrupt();
            join(w);
        }
        finished = true;
        abortQueued();
        for (PeerWrite pw : peerWrites.values()) {
            pw.region.unpin(this);
        }
        peerWrites.clear();
        ConnectionClosedException failure = pendingFailure();
        for (Long id : List.copyOf(pending.keySet())) {
            Pending p = pending.remove(id);
            if (p != null) {
                p.fail(failure);
            }
        }
        transport.connectionClosed(this);
        ConnectionEvents e;
        synchronized (lock) {
            e = events;
        }
        if (e != null) {
            e.onClosed(closeCause);
        }
    }

    private static void join(Thread t) {
        try {
            if (!t.join(java.time.Duration.ofMillis(JOIN_MILLIS))) {
                LOG.log(System.Logger.Level.WARNING, "thread " + t.getName() + " did not stop within " + JOIN_MILLIS + " ms");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public void close() {
        Thread r;
        boolean started;
        synchronized (lock) {
            if (closeCause == null) {
                closeCause = new ConnectionClosedException("connection to " + remoteAddress + " was closed locally");
            }
            r = reader;
            started = events != null;
        }
        if (!started) {
            closeChannel();
            transport.connectionClosed(this);
            return;
        }
        sendCloseFrame();
        closeChannel();
        Thread self = Thread.currentThread();
        if (r != null && r != self && writer != self) {
            join(r);
        }
    }

    /** Tells the peer we are going (best effort, briefly), so it reports an orderly close. */
    private void sendCloseFrame() {
        if (finished) {
            return;
        }
        Control close = new Control(new CompletableFuture<>(), TcpFrameCodec.encodeEmpty(TcpFrameCodec.CLOSE, 0));
        outgoing.addFirst(close);
        try {
            close.done.get(50, TimeUnit.MILLISECONDS);
        } catch (Exception ignored) {
            // the peer learns from the closed socket instead
        }
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return remoteAddress;
    }

    @Override
    public InetSocketAddress localAddress() {
        return localAddress;
    }

    @Override
    public String toString() {
        return "TcpConnection[" + localAddress + " -> " + remoteAddress + "]";
    }

    // ---- operation state ----

    private abstract static class Pending {
        final long id;
        final CompletableFuture<Void> future = new CompletableFuture<>();

        Pending(long id) {
            this.id = id;
        }

        void fail(Throwable t) {
            future.completeExceptionally(t);
        }
    }

    private static final class PendingRead extends Pending {
        final MemorySegment sink;
        long received; // reader thread only

        PendingRead(long id, MemorySegment sink) {
            super(id);
            this.sink = sink;
        }
    }

    /** Completes when the peer answered and our writer stopped reading the source, whichever is last. */
    private final class PendingWrite extends Pending {
        private boolean answered;
        private boolean dataDone;
        private Throwable error;

        PendingWrite(long id) {
            super(id);
        }

        synchronized boolean answered() {
            return answered;
        }

        synchronized void answer(Throwable failure) {
            if (!answered) {
                answered = true;
                error = failure;
                maybeComplete();
            }
        }

        synchronized void dataDone() {
            dataDone = true;
            maybeComplete();
        }

        private void maybeComplete() {
            if (answered && dataDone && pending.remove(id, this)) {
                if (error == null) {
                    future.complete(null);
                } else {
                    future.completeExceptionally(error);
                }
            }
        }
    }

    private static final class PeerWrite {
        final TcpRegion region;
        final long offset;
        final long length;
        long received;

        PeerWrite(TcpRegion region, long offset, long length) {
            this.region = region;
            this.offset = offset;
            this.length = length;
        }
    }

    /** Work for the writer thread; returns true when it has more to write (it is then queued again). */
    private interface Outgoing {
        boolean writeTo(TcpConnection c) throws IOException;

        void abort(ConnectionClosedException cause);
    }

    /** Whole frames written at once; {@code done} (if any) completes once written. */
    private static final class Control implements Outgoing {
        final CompletableFuture<Void> done;
        final ByteBuffer[] buffers;

        Control(ByteBuffer... buffers) {
            this(null, buffers);
        }

        Control(CompletableFuture<Void> done, ByteBuffer... buffers) {
            this.done = done;
            this.buffers = buffers;
        }

        @Override
        public boolean writeTo(TcpConnection c) throws IOException {
            c.writeFully(buffers);
            if (done != null) {
                done.complete(null);
            }
            return false;
        }

        @Override
        public void abort(ConnectionClosedException cause) {
            if (done != null) {
                done.completeExceptionally(cause);
            }
        }
    }

    /** Streams a served read from the registered region, a chunk per turn, checking revocation between chunks. */
    private final class ServeRead implements Outgoing {
        final long id;
        final TcpRegion region;
        final long offset;
        final long length;
        long sent;
        final AtomicBoolean released = new AtomicBoolean();

        ServeRead(long id, TcpRegion region, long offset, long length) {
            this.id = id;
            this.region = region;
            this.offset = offset;
            this.length = length;
        }

        @Override
        public boolean writeTo(TcpConnection c) throws IOException {
            if (region.isRevoked()) {
                release();
                c.writeFully(TcpFrameCodec.encodeError(id, RemoteAccessException.Reason.RESPONDER_ERROR,
                        "the region was deregistered during the read"));
                return false;
            }
            int n = (int) Math.min(chunkSize, length - sent);
            if (n == 0) {
                release();
                transport.metrics().recordServed(OperationType.READ, length);
                c.writeFully(TcpFrameCodec.encodeEmpty(TcpFrameCodec.READ_DONE, id));
                return false;
            }
            ByteBuffer data;
            try {
                data = region.segment().asSlice(offset + sent, n).asByteBuffer();
            } catch (RuntimeException e) {
                // The memory was freed without deregistering it first: refuse instead of crashing.
                release();
                c.writeFully(TcpFrameCodec.encodeError(id, RemoteAccessException.Reason.RESPONDER_ERROR,
                        "the region's memory is no longer accessible"));
                return false;
            }
            ByteBuffer header = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE);
            TcpFrameCodec.putHeader(header, TcpFrameCodec.READ_DATA, n, id);
            sent += n;
            if (sent == length) {
                c.writeFully(header.flip(), data, TcpFrameCodec.encodeEmpty(TcpFrameCodec.READ_DONE, id));
                release();
                transport.metrics().recordServed(OperationType.READ, length);
                return false;
            }
            c.writeFully(header.flip(), data);
            return true;
        }

        private void release() {
            if (released.compareAndSet(false, true)) {
                region.unpin(TcpConnection.this);
            }
        }

        @Override
        public void abort(ConnectionClosedException cause) {
            release();
        }
    }

    /** Sends a write request and its data, a chunk per turn; stops early once the peer refused it. */
    private final class OutgoingWrite implements Outgoing {
        final PendingWrite op;
        final long remoteAddress;
        final long key;
        final MemorySegment source;
        boolean requested;
        long sent;
        final AtomicBoolean done = new AtomicBoolean();

        OutgoingWrite(PendingWrite op, long remoteAddress, long key, MemorySegment source) {
            this.op = op;
            this.remoteAddress = remoteAddress;
            this.key = key;
            this.source = source;
        }

        @Override
        public boolean writeTo(TcpConnection c) throws IOException {
            ByteBuffer request = null;
            if (!requested) {
                requested = true;
                request = TcpFrameCodec.encodeRequest(TcpFrameCodec.WRITE_REQ, op.id, remoteAddress, source.byteSize(), key);
            }
            int n = (int) Math.min(chunkSize, source.byteSize() - sent);
            if (n == 0 || op.answered()) {
                if (request != null) {
                    c.writeFully(request);
                }
                finishData();
                return false;
            }
            ByteBuffer header = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE);
            TcpFrameCodec.putHeader(header, TcpFrameCodec.WRITE_DATA, n, op.id);
            ByteBuffer data = source.asSlice(sent, n).asByteBuffer();
            if (request != null) {
                c.writeFully(request, header.flip(), data);
            } else {
                c.writeFully(header.flip(), data);
            }
            sent += n;
            if (sent == source.byteSize()) {
                finishData();
                return false;
            }
            return true;
        }

        private void finishData() {
            if (done.compareAndSet(false, true)) {
                op.dataDone();
            }
        }

        @Override
        public void abort(ConnectionClosedException cause) {
            op.answer(cause);
            finishData();
        }
    }
}
