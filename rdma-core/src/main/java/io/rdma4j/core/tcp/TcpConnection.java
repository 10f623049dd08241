package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ConnectionEvents;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderRegion;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

/**
 * One tcp connection, symmetric: each side issues requests ({@link PendingOperations}) and serves the peer's
 * ({@link PeerRequests}). Exactly one thread at a time reads and dispatches (moving data straight from the
 * socket into sinks and written regions); it hands reading over to run a request's handler ({@link ReaderThreads}).
 * Frames go out through {@link OutgoingFrames} (served reads straight from registered memory): on a plain socket
 * written without blocking by whichever thread has them, the rest by the reader while it waits; over TLS by a
 * writer thread. Either way a side never blocks reading while its peer blocks writing. Large transfers go out one
 * chunk per turn, so other frames interleave. This class owns the socket, the threads and the closing.
 *
 * <p>On a plain socket the reader waits for data in a selector rather than blocking in {@code read}: a socket in
 * blocking mode cannot be written without blocking, so every response would wait for a writer thread, a hand-off
 * that costs small operations more than the selector's wait costs bulk reads.
 */
final class TcpConnection implements ProviderConnection {

    private static final System.Logger LOG = System.getLogger(TcpConnection.class.getName());
    private static final long JOIN_MILLIS = 10_000;

    private final TcpTransport transport;
    private final SocketChannel channel;
    private final FrameChannel frames;
    private final InetSocketAddress remoteAddress;
    private final InetSocketAddress localAddress;
    private final int chunkSize;
    private final int maxMessageSize;
    private final PendingOperations pending;
    private final OutgoingFrames outgoing;
    private final PeerRequests peerRequests;
    private final FrameInput input;
    private final ReadBounds bounds;
    private final Object lock = new Object();
    private final AtomicBoolean finishedOnce = new AtomicBoolean();
    private final AtomicBoolean slotReleased = new AtomicBoolean();
    private final KeepAlive keepAlive;
    /** The reader waits here while a bound is reached; the writer wakes it when a response is written. */
    private final TcpOptions options;
    /** Gives the listener's connection slot back; runs once. */
    private final Runnable releaseSlot;
    private volatile boolean finished;
    private volatile RdmaException closeCause;
    private volatile ConnectionEvents events;
    private ReaderThreads readers;
    /** Set while attached to a poller, whose thread then reads between frames. */
    private volatile PolledReading polled;
    private final IncomingMessage incoming;
    /** The leader's: bodies of requests and errors. */
    private final ByteBuffer body = ByteBuffer.allocate(1 + TcpFrameCodec.MAX_ERROR_MESSAGE);
    private Thread writer;

    TcpConnection(TcpTransport transport, SocketChannel channel, FrameChannel frames, Runnable releaseSlot) throws IOException {
        this.transport = transport;
        this.options = transport.options();
        this.releaseSlot = releaseSlot;
        this.channel = channel;
        this.remoteAddress = (InetSocketAddress) channel.getRemoteAddress();
        this.localAddress = (InetSocketAddress) channel.getLocalAddress();
        this.chunkSize = transport.options().chunkSize();
        this.maxMessageSize = transport.config().maxMessageSize();
        this.pending = new PendingOperations(this, remoteAddress);
        this.frames = frames;
        frames.startFrames();
        this.outgoing = new OutgoingFrames(this, frames, transport.unsentResponseBytes());
        frames.writeWhileWaiting(outgoing);
        this.input = new FrameInput(frames, remoteAddress, pending);
        this.bounds = new ReadBounds(transport, outgoing, frames, input, remoteAddress, () -> closeCause == null);
        this.peerRequests = new PeerRequests(this, transport, outgoing, remoteAddress, chunkSize);
        this.incoming = new IncomingMessage(bounds, outgoing, () -> events);
        this.keepAlive = new KeepAlive(options.idleTimeout(), outgoing, bounds, input);
    }

    @Override
    public void start(ConnectionEvents events) {
        synchronized (lock) {
            if (this.events != null) {
                throw new IllegalStateException("connection already started");
            }
            this.events = events;
            bounds.start(events);
            if (closeCause == null) {
                String name = "rdma4j-tcp-" + remoteAddress.getPort();
                // Platform threads: they wait in selectors (or blocking TLS reads), and a waiting platform thread
                // wakes straight from the kernel. Only TLS needs a writer thread; see OutgoingFrames.
                if (outgoing.needsWriterThread()) {
                    writer = Thread.ofPlatform().daemon().name(name + "-writer").start(outgoing::writeLoop);
                }
                readers = new ReaderThreads(name + "-reader", this::readLoop);
                readers.start();
                return;
            }
        }
        finish();
    }

    // ---- requester ----

    @Override
    public CompletableFuture<Void> read(long remoteAddress, long remoteKey, MemorySegment sink, ProviderRegion localRegion) {
        PendingOperations.PendingRead p = pending.newRead(sink);
        if (pending.track(p)) {
            outgoing.enqueue(new OutgoingFrames.Control(
                    TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, p.id, remoteAddress, sink.byteSize(), remoteKey)));
        }
        return p.future;
    }

    /** Posts the whole batch of requests with one gathering write. */
    @Override
    public List<CompletableFuture<Void>> readAll(List<ProviderRead> reads) {
        List<CompletableFuture<Void>> results = new ArrayList<>(reads.size());
        List<ByteBuffer> requests = new ArrayList<>(reads.size());
        for (ProviderRead r : reads) {
            PendingOperations.PendingRead p = pending.newRead(r.sink());
            results.add(p.future);
            if (pending.track(p)) {
                requests.add(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, p.id, r.remoteAddress(), r.sink().byteSize(), r.remoteKey()));
            }
        }
        if (!requests.isEmpty()) {
            outgoing.enqueue(new OutgoingFrames.Control(requests.toArray(ByteBuffer[]::new)));
        }
        return results;
    }

    @Override
    public CompletableFuture<Void> write(long remoteAddress, long remoteKey, MemorySegment source, ProviderRegion localRegion) {
        PendingOperations.PendingWrite p = pending.newWrite();
        if (pending.track(p)) {
            outgoing.enqueue(new OutgoingWrite(p, remoteAddress, remoteKey, source, chunkSize));
        }
        return p.future;
    }

    /**
     * Checks for up to {@code tcp.await-spin-micros}: when the reader thread lands the answer meanwhile, nobody has
     * to be woken, which saves a thread wake-up, tens of microseconds on a virtual machine and more than a loopback
     * round trip.
     */
    @Override
    public void spinWait(BooleanSupplier done) {
        long spinUntil = System.nanoTime() + options.awaitSpinNanos();
        while (!done.getAsBoolean() && System.nanoTime() - spinUntil < 0) {
            // Yielding, not just pausing: with more runnable threads than cores, the reader thread that would land
            // the answer may be waiting for this very CPU.
            Thread.yield();
        }
    }

    @Override
    public CompletableFuture<Void> send(ByteBuffer message) {
        return outgoing.sendMessage(maxMessageSize, false, message);
    }

    /** Writes the caller's buffers as they are: a queued frame keeps them until written or aborted. */
    @Override
    public CompletableFuture<Void> send(ByteBuffer header, ByteBuffer body) {
        return send(header, body, false);
    }

    @Override
    public CompletableFuture<Void> send(ByteBuffer header, ByteBuffer body, boolean more) {
        return outgoing.sendMessage(maxMessageSize, more, header, body);
    }

    @Override
    public void flushSends() {
        outgoing.flush();
    }

    @Override
    public boolean sendsInPlace() {
        return true;
    }

    /** Hands reading to another thread when the caller reads this connection; see {@link ReaderThreads}. */
    @Override
    public boolean handOffReading() {
        ReaderThreads r = readers;
        return r != null && r.handOff();
    }

    // ---- reader thread ----

    /** Runs while the calling thread leads {@link #readers}; the last leader finishes the connection. */
    private void readLoop() {
        FrameInput input = this.input;
        ByteBuffer header = ByteBuffer.allocateDirect(TcpFrameCodec.HEADER_SIZE);
        int frames = 0;
        try {
            while (true) {
                PolledReading p = polled;
                if (p != null && frames > 0 && incoming.partial() == null && !input.holdsWholeFrame() && closeCause == null
                        && !p.poller().stalled()) {
                    // a frame read since this thread took the lead (so the poller's thread and this one never pass a
                    // frame neither can read back and forth), and the loop polls: it reads on when input arrives
                    p.leave(outgoing.awaitsRoom());
                    return;
                }
                if (incoming.partial() != null) {
                    input.readFully(incoming.partial());
                    incoming.deliver();
                } else {
                    bounds.awaitCapacity(0);
                    input.readFully(header.clear());
                    TcpFrameCodec.Header h = TcpFrameCodec.decodeHeader(header.flip(), maxMessageSize);
                    if (h.type() == TcpFrameCodec.SEND) {
                        long cost = IncomingMessage.cost(h);
                        bounds.admitMessage(cost);
                        input.readFully(incoming.begin(h, cost));
                        incoming.deliver();
                    } else {
                        dispatch(h);
                    }
                }
                frames++;
                if (!readers.leads()) {
                    // This thread ran a request's handler after handing reading over: the new leader reads on, and
                    // owns the input from then on, so this thread must not look at it again.
                    return;
                }
                // Responses wait while the next frame is already here, so a burst of requests is answered in one
                // write. Before the reader may wait, it writes them, and whatever a full socket left.
                if (!input.holdsWholeFrame()) {
                    outgoing.flush();
                }
            }
        } catch (IOException | RuntimeException e) {
            fail(e);
        } catch (InternalError e) {
            fail(memoryFault(e));
        }
        // After a hand-off a failure here (a bug) only closes the socket: the leader then finishes.
        if (readers.leads()) {
            finish();
        }
    }

    /** The leader: a frame other than a message, its header consumed; reads its body and acts on it. */
    void dispatch(TcpFrameCodec.Header h) throws IOException {
        switch (h.type()) {
            case TcpFrameCodec.READ_REQ -> peerRequests.serveRead(TcpFrameCodec.decodeRequest(h, input.readBody(body, h)));
            case TcpFrameCodec.WRITE_REQ -> peerRequests.acceptWrite(TcpFrameCodec.decodeRequest(h, input.readBody(body, h)));
            case TcpFrameCodec.WRITE_DATA -> peerRequests.receiveWriteData(h, input);
            case TcpFrameCodec.READ_DATA -> pending.receiveReadData(h, input);
            case TcpFrameCodec.READ_DONE -> pending.readDone(h.id());
            case TcpFrameCodec.WRITE_ACK -> pending.writeAnswered(h.id(), null);
            case TcpFrameCodec.ERROR -> pending.remoteError(TcpFrameCodec.decodeError(h, input.readBody(body, h)));
            case TcpFrameCodec.PING -> {
                // keep-alive: reading it is all it asks for
            }
            case TcpFrameCodec.CLOSE -> throw new ConnectionClosedException(remoteAddress + " closed the connection");
            default -> throw new ProtocolException("unexpected frame type " + h.type());
        }
    }

    // ---- reading on a poller's thread: PolledReading ----

    /** Reads this connection on {@code poller}'s thread from its next frame on; false over TLS or once closed. */
    boolean pollOn(TcpPoller poller) {
        if (!frames.writesWithoutBlocking()) {
            return false; // TLS: the engine's reads block, and its reader thread reads
        }
        synchronized (lock) {
            if (polled != null || readers == null || closeCause != null) {
                return polled != null && polled.poller() == poller;
            }
            try {
                polled = new PolledReading(this, poller, readers, channel, input, incoming, bounds, outgoing, maxMessageSize);
            } catch (java.nio.channels.ClosedChannelException | IllegalStateException e) {
                return false; // closed, or its key in this poller is still being cancelled: reader threads read it
            }
        }
        return true;
    }

    void stopPolling(TcpPoller poller) {
        PolledReading p = polled;
        if (p != null && p.poller() == poller) {
            p.detach();
        }
    }

    void pollingStopped(PolledReading p) {
        synchronized (lock) {
            if (polled == p) {
                polled = null;
            }
        }
        p.poller().forget(p);
    }

    /** Frames wait for the socket to have room: whoever holds the lead watches for it. */
    void roomAwaited() {
        frames.wakeUp();
        PolledReading p = polled;
        if (p != null) {
            p.awaitRoom();
        }
    }

    /** The leader on a poller's thread failed: as the read loop does, the connection ends. */
    void pollingFailed(Throwable t) {
        fail(t instanceof InternalError e ? memoryFault(e) : t);
        if (readers.leads()) {
            finish();
        }
    }

    /**
     * The JVM reports a fault in mapped memory (a file registered with {@code registerFile} and truncated under its
     * mapping) as an {@link InternalError}: it ends this connection, as a NIC's access error ends a queue pair, and
     * nothing else.
     */
    static IOException memoryFault(InternalError e) {
        return new IOException("registered memory faulted while being read or written (a mapped file truncated"
                + " under its registration?): " + e.getMessage(), e);
    }

    /** A response was written or dropped: a reader waiting on the response bounds may go on. */
    void responseWritten() {
        bounds.roomMade();
    }

    @Override
    public void messageTaken() {
        bounds.roomMade();
    }

    /** Called periodically by the transport: closes the connection if the peer went silent; see {@link KeepAlive}. */
    void checkIdle(long now) {
        String stopped = events == null || finished ? null : keepAlive.check(now);
        if (stopped != null) {
            transport.rejected("idle connection from " + remoteAddress + " closed after " + options.idleTimeout()
                    + " without the peer " + stopped + " (tcp.idle-timeout)");
            fail(new ConnectionClosedException("connection to " + remoteAddress + " was idle for longer than tcp.idle-timeout "
                    + options.idleTimeout() + "; the peer stopped " + stopped));
        }
    }

    /** Gives the listener's connection slot back, once. */
    void releaseSlot() {
        if (slotReleased.compareAndSet(false, true)) {
            releaseSlot.run();
        }
    }

    // ---- closing ----

    /** True once the connection finished: nothing is written or served any more. */
    boolean isFinished() {
        return finished;
    }

    /** Records why the connection ends (first cause wins) and closes the socket, which stops both threads. */
    void fail(Throwable t) {
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
        frames.wakeUp();
        PolledReading p = polled;
        if (p != null) {
            p.wake(); // a selector never reports a closed socket: a reader thread sees the end
        }
    }

    /** The exception for operations that the connection's end cut short. */
    ConnectionClosedException pendingFailure() {
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
        incoming.abandon();
        PolledReading p = polled;
        if (p != null) {
            pollingStopped(p);
        }
        frames.release();
        outgoing.abortAll();
        peerRequests.releaseAll();
        transport.connectionClosed(this);
        ConnectionEvents e;
        synchronized (lock) {
            e = events;
        }
        // Reported before what was pending fails (as the verbs provider does): whoever sees an operation fail as
        // closed then also sees the connection closed.
        if (e != null) {
            e.onClosed(closeCause);
        }
        pending.failAll(pendingFailure());
        ReaderThreads r;
        synchronized (lock) {
            r = readers;
        }
        if (r != null) {
            r.end();
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
        ReaderThreads r;
        boolean started;
        synchronized (lock) {
            if (closeCause == null) {
                closeCause = new ConnectionClosedException("connection to " + remoteAddress + " was closed locally");
            }
            r = readers;
            started = events != null;
        }
        if (!started) {
            closeChannel();
            frames.release();
            transport.connectionClosed(this);
            return;
        }
        sendCloseFrame();
        closeChannel();
        if (r != null && writer != Thread.currentThread()) {
            awaitStopped(r);
        }
    }

    /** Waits for the readers to stop: once they have, no thread touches a sink, source or region of this connection. */
    private static void awaitStopped(ReaderThreads r) {
        try {
            if (!r.awaitStopped(java.time.Duration.ofMillis(JOIN_MILLIS))) {
                LOG.log(System.Logger.Level.WARNING, "the reader of " + r + " did not stop within " + JOIN_MILLIS + " ms");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Tells the peer we are going (best effort, briefly), so it reports an orderly close. */
    private void sendCloseFrame() {
        if (finished) {
            return;
        }
        OutgoingFrames.Control close = new OutgoingFrames.Control(new CompletableFuture<>(),
                TcpFrameCodec.encodeEmpty(TcpFrameCodec.CLOSE, 0));
        outgoing.enqueueFirst(close);
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
    public Optional<String> peerPrincipal() {
        return frames.peerPrincipal();
    }

    @Override
    public String toString() {
        return "TcpConnection[" + localAddress + " -> " + remoteAddress + "]";
    }
}
