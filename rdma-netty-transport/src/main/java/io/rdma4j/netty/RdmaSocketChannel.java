package io.rdma4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.AbstractChannel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.FileRegion;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.Future;
import io.netty.util.internal.StringUtil;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.nio.channels.UnsupportedAddressTypeException;
import java.nio.channels.WritableByteChannel;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;

/**
 * A stream channel over one rdma4j connection, for event loops of {@link RdmaIoHandler}: Netty's
 * {@code SocketChannel} with rdma4j's two-sided messages underneath. Written bytes go out as messages of up to
 * max-message-size (small flushed buffers gathered into one); each received message is handed to the pipeline as
 * one {@code ByteBuf}, without a copy. An empty message marks the end of a side's stream, so {@link #shutdownOutput()}
 * is a half-close the peer sees as end of input, and a connection that closes without it is a reset.
 * Options: {@link RdmaSocketChannelConfig}.
 */
public class RdmaSocketChannel extends AbstractChannel implements SocketChannel {

    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);

    private enum State { OPEN, CONNECTING, ACTIVE, CLOSED }

    private final RdmaSocketChannelConfig config = new RdmaSocketChannelConfig(this);
    private final Inbox inbox = new Inbox(this::post);
    /** Events posted while the channel had no valid registration; posted again once it has one. */
    private final ConcurrentLinkedQueue<IoEvent> orphans = new ConcurrentLinkedQueue<>();
    private volatile State state;
    private volatile RdmaConnection connection;
    private volatile RdmaIoHandler.Registration registration;
    /** What the loop returned for the registration; cancelling goes through it. */
    private IoRegistration ioRegistration;
    private volatile boolean inputShutdown;
    private volatile boolean outputShutdown;
    // loop thread only
    private int maxMessageSize;
    private SendWindow window;
    private boolean readRequested;
    private boolean reading;
    private boolean readScheduled;
    private boolean inputClosedSeenErrorOnRead;
    private ChannelPromise connectPromise;
    private Future<?> connectTimeout;
    private SocketAddress requestedRemote;

    /** A client channel, connected with {@code Bootstrap.connect}. */
    public RdmaSocketChannel() {
        super(null);
        state = State.OPEN;
    }

    /** A channel of a connection {@code parent} accepted. */
    RdmaSocketChannel(RdmaServerSocketChannel parent, RdmaConnection connection, RdmaTransport transport) {
        super(parent);
        start(connection, transport);
    }

    private void start(RdmaConnection connection, RdmaTransport transport) {
        this.connection = connection;
        this.maxMessageSize = transport.config().maxMessageSize();
        int window = config.getSendBufferSize() > 0 ? config.getSendBufferSize() : 4 * maxMessageSize;
        this.window = new SendWindow(window, transport.config().maxOutstandingOperations(), this::post);
        state = State.ACTIVE;
    }

    @Override
    public ServerSocketChannel parent() {
        return (ServerSocketChannel) super.parent();
    }

    @Override
    public ChannelMetadata metadata() {
        return METADATA;
    }

    @Override
    public RdmaSocketChannelConfig config() {
        return config;
    }

    @Override
    public boolean isOpen() {
        return state != State.CLOSED;
    }

    @Override
    public boolean isActive() {
        return state == State.ACTIVE;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return (InetSocketAddress) super.remoteAddress();
    }

    @Override
    protected SocketAddress localAddress0() {
        RdmaConnection c = connection;
        return c == null ? null : c.localAddress();
    }

    @Override
    protected SocketAddress remoteAddress0() {
        RdmaConnection c = connection;
        return c == null ? null : c.remoteAddress();
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(RdmaUnsafe.class);
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaUnsafe();
    }

    // ---- registration and events ----

    @Override
    protected void doRegister(ChannelPromise promise) {
        ((IoEventLoop) eventLoop()).register((RdmaUnsafe) unsafe()).addListener(f -> {
            if (!f.isSuccess()) {
                promise.setFailure(f.cause());
                return;
            }
            ioRegistration = (IoRegistration) f.getNow();
            registration = ioRegistration.attachment();
            promise.setSuccess();
            IoEvent orphan;
            while ((orphan = orphans.poll()) != null) {
                post(orphan);
            }
            if (state == State.ACTIVE) {
                inbox.pump(connection);
            }
        });
    }

    @Override
    protected void doDeregister() {
        IoRegistration r = ioRegistration;
        if (r != null) {
            ioRegistration = null;
            registration = null;
            r.cancel();
        }
    }

    /** From any thread: hands {@code event} to the loop the channel is registered with. */
    private void post(IoEvent event) {
        RdmaIoHandler.Registration r = registration;
        if (r == null || !r.post(event)) {
            orphans.add(event);
            if (state == State.CLOSED) {
                discardOrphans();
            }
        }
    }

    private void discardOrphans() {
        IoEvent e;
        while ((e = orphans.poll()) != null) {
            if (e instanceof RdmaEvent r) {
                r.discard();
            }
        }
    }

    private void handle(RdmaEvent event) {
        switch (event) {
            case RdmaEvent.Received r -> received(r.message(), r.failure());
            case RdmaEvent.Writable w -> {
                if (state == State.ACTIVE) {
                    ((RdmaUnsafe) unsafe()).flush0();
                }
            }
            case RdmaEvent.SendFailed f -> {
                if (state == State.ACTIVE && !outputShutdown) {
                    ((RdmaUnsafe) unsafe()).writeFailed(RdmaErrors.sendFailed(f.failure()));
                }
            }
            case RdmaEvent.Connected c -> connected(c.connection(), c.failure());
            case RdmaEvent.ReadNow n -> {
                readScheduled = false;
                readLoop();
            }
            case RdmaEvent.Accepted a -> a.discard();
        }
    }

    // ---- reading ----

    @Override
    protected void doBeginRead() {
        if (state != State.ACTIVE) {
            return;
        }
        readRequested = true;
        if (!reading && !readScheduled && readable()) {
            readScheduled = true;
            post(new RdmaEvent.ReadNow());
        }
        inbox.pump(connection);
    }

    void autoReadCleared() {
        readRequested = false;
    }

    private boolean readable() {
        return inbox.available(connection) || (inputShutdown && !inputClosedSeenErrorOnRead);
    }

    private void received(ByteBuffer message, Throwable failure) {
        if (state != State.ACTIVE) {
            return;
        }
        inbox.completed(connection, message, failure);
        if (inbox.peerClosed() && inputClosedSeenErrorOnRead) {
            // the peer ended its stream, we read past the end, and now its connection is gone too
            closeNow();
            return;
        }
        readLoop();
    }

    private void readLoop() {
        if (reading) {
            return; // the loop further up the stack sees what changed
        }
        reading = true;
        try {
            // once the peer's end of stream has arrived, what precedes it is read whether or not a read was asked
            // for, as epoll reads after EPOLLRDHUP, so the end reaches the pipeline
            while ((readRequested || inbox.endReceived()) && state == State.ACTIVE && readable()) {
                if (inputShutdown && (inputClosedSeenErrorOnRead || !config.isAllowHalfClosure())) {
                    readRequested = false;
                    break;
                }
                readOnce();
            }
        } finally {
            reading = false;
        }
        if (state == State.ACTIVE) {
            inbox.pump(connection);
        }
    }

    /**
     * One read loop, as a socket channel's: buffers from the channel's allocator, sized by its
     * {@code RecvByteBufAllocator}, filled from the received messages (a message may span several).
     */
    private void readOnce() {
        var handle = unsafe().recvBufAllocHandle();
        handle.reset(config);
        var pipeline = pipeline();
        if (inputShutdown) {
            // input shut down locally: a read past the end, as a socket reads end of stream again
            readRequested = false;
            handle.readComplete();
            pipeline.fireChannelReadComplete();
            shutdownInput(true);
            return;
        }
        boolean end = false;
        Throwable failure = null;
        do {
            ByteBuffer m = inbox.head(connection);
            if (m == null) {
                failure = inbox.failure();
                break;
            }
            readRequested = false;
            if (SendWindow.isEnd(m)) {
                inbox.consumed();
                end = true;
                break;
            }
            ByteBuf buf = handle.allocate(config.getAllocator());
            int n = Math.min(buf.writableBytes(), m.remaining());
            handle.attemptedBytesRead(buf.writableBytes());
            buf.writeBytes(m.slice(m.position(), n));
            m.position(m.position() + n);
            if (!m.hasRemaining()) {
                inbox.consumed();
            }
            handle.lastBytesRead(n);
            handle.incMessagesRead(1);
            pipeline.fireChannelRead(buf);
        } while (handle.continueReading() && state == State.ACTIVE);
        handle.readComplete();
        pipeline.fireChannelReadComplete();
        if (end) {
            shutdownInput(true);
        } else if (failure != null && state == State.ACTIVE) {
            readRequested = false;
            pipeline.fireExceptionCaught(RdmaErrors.reset(failure));
            closeNow();
        }
    }

    /** The input ended: as epoll's channel, the end and (all data read) the read-complete event, or a close. */
    private void shutdownInput(boolean allDataRead) {
        if (!inputShutdown) {
            if (!config.isAllowHalfClosure()) {
                closeNow();
                return;
            }
            inputShutdown = true;
            pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
        }
        if (allDataRead && !inputClosedSeenErrorOnRead && state == State.ACTIVE) {
            inputClosedSeenErrorOnRead = true;
            pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
        }
        if (inputClosedSeenErrorOnRead && inbox.peerClosed() && state == State.ACTIVE) {
            closeNow();
        }
    }

    // ---- writing ----

    @Override
    protected Object filterOutboundMessage(Object msg) {
        if (msg instanceof ByteBuf || msg instanceof FileRegion) {
            return msg;
        }
        throw new UnsupportedOperationException("unsupported message type: " + StringUtil.simpleClassName(msg)
                + " (expected: ByteBuf, FileRegion)");
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) throws Exception {
        RdmaConnection c = connection;
        Object current;
        while ((current = in.current()) != null) {
            if (!window.hasRoom() && !window.block()) {
                return; // a completion posts Writable, which flushes again
            }
            if (current instanceof FileRegion region) {
                writeRegion(in, c, region);
                continue;
            }
            ByteBuffer[] buffers = in.nioBuffers(1024, maxMessageSize);
            int count = in.nioBufferCount();
            if (count == 0) {
                in.remove(); // an empty buffer
                continue;
            }
            ByteBuffer message;
            boolean single = count == 1 || in.nioBufferSize() > maxMessageSize;
            if (single) {
                message = buffers[0];
                if (message.remaining() > maxMessageSize) {
                    message = message.slice(message.position(), maxMessageSize);
                }
            } else {
                // small buffers flushed together go as one message; send copies it before returning
                message = registration.handler().gatherBuffer(maxMessageSize);
                for (int i = 0; i < count; i++) {
                    message.put(buffers[i]);
                }
                message.flip();
            }
            int n = message.remaining();
            CompletableFuture<Void> sent = window.send(c, message);
            if (sent.isCompletedExceptionally()) {
                throw RdmaErrors.sendFailed(sent.exceptionNow());
            }
            if (single) {
                // the outbound buffer hands out the same NIO view until its buffer is done: move it past what went
                buffers[0].position(buffers[0].position() + n);
            }
            in.removeBytes(n);
        }
    }

    /** The next message's worth of a file region: rdma4j has no sendfile, so its bytes are copied into a message. */
    private void writeRegion(ChannelOutboundBuffer in, RdmaConnection c, FileRegion region) throws Exception {
        if (region.transferred() >= region.count()) {
            in.remove();
            return;
        }
        ByteBuffer message = registration.handler().gatherBuffer(maxMessageSize);
        long n = region.transferTo(new MessageFiller(message), region.transferred());
        message.flip();
        if (n <= 0 || !message.hasRemaining()) {
            throw new java.io.EOFException("file region " + region + " ended before its count: " + region.transferred()
                    + " of " + region.count() + " bytes");
        }
        CompletableFuture<Void> sent = window.send(c, message);
        if (sent.isCompletedExceptionally()) {
            throw RdmaErrors.sendFailed(sent.exceptionNow());
        }
        in.progress(n);
        if (region.transferred() >= region.count()) {
            in.remove();
        }
    }

    /** Takes what a file region transfers into one message buffer, until it is full. */
    private record MessageFiller(ByteBuffer message) implements WritableByteChannel {
        @Override
        public int write(ByteBuffer src) {
            int n = Math.min(src.remaining(), message.remaining());
            message.put(src.slice(src.position(), n));
            src.position(src.position() + n);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }

    @Override
    protected void doShutdownOutput() {
        if (!outputShutdown) {
            outputShutdown = true;
            if (state == State.ACTIVE) {
                window.sendEnd(connection);
            }
        }
    }

    // ---- half-close ----

    @Override
    public boolean isInputShutdown() {
        return inputShutdown || !isActive();
    }

    @Override
    public boolean isOutputShutdown() {
        return outputShutdown || !isActive();
    }

    @Override
    public boolean isShutdown() {
        return isInputShutdown() && isOutputShutdown();
    }

    @Override
    public ChannelFuture shutdownOutput() {
        return shutdownOutput(newPromise());
    }

    @Override
    public ChannelFuture shutdownOutput(ChannelPromise promise) {
        onLoop(() -> ((RdmaUnsafe) unsafe()).shutdownOutput(promise), promise);
        return promise;
    }

    @Override
    public ChannelFuture shutdownInput() {
        return shutdownInput(newPromise());
    }

    @Override
    public ChannelFuture shutdownInput(ChannelPromise promise) {
        onLoop(() -> {
            if (state != State.ACTIVE) {
                promise.setFailure(new ClosedChannelException());
                return;
            }
            inputShutdown = true;
            inbox.dropMessages();
            promise.setSuccess();
        }, promise);
        return promise;
    }

    @Override
    public ChannelFuture shutdown() {
        return shutdown(newPromise());
    }

    @Override
    public ChannelFuture shutdown(ChannelPromise promise) {
        shutdownOutput().addListener(output -> shutdownInput().addListener(input -> {
            Throwable cause = output.cause() != null ? output.cause() : input.cause();
            if (cause == null) {
                promise.setSuccess();
            } else {
                promise.setFailure(cause);
            }
        }));
        return promise;
    }

    private void onLoop(Runnable task, ChannelPromise promise) {
        EventLoop loop = eventLoop();
        if (loop.inEventLoop()) {
            task.run();
        } else {
            try {
                loop.execute(task);
            } catch (RuntimeException e) {
                promise.setFailure(e);
            }
        }
    }

    // ---- connect and close ----

    private void closeNow() {
        unsafe().close(unsafe().voidPromise());
    }

    private void connected(RdmaConnection c, Throwable failure) {
        if (connectTimeout != null) {
            connectTimeout.cancel(false);
            connectTimeout = null;
        }
        ChannelPromise promise = connectPromise;
        connectPromise = null;
        if (failure != null) {
            if (promise != null) {
                promise.tryFailure(RdmaErrors.connectFailed(failure, requestedRemote));
                closeNow();
            }
            return;
        }
        if (promise == null || state != State.CONNECTING) {
            c.close(); // closed or cancelled meanwhile
            return;
        }
        start(c, registration.handler().transport());
        boolean promiseSet = promise.trySuccess();
        pipeline().fireChannelActive();
        if (!promiseSet) {
            closeNow();
            return;
        }
        inbox.pump(c);
    }

    @Override
    protected void doBind(SocketAddress localAddress) {
        throw new UnsupportedOperationException("rdma4j chooses the local address of a connection; connect without one");
    }

    @Override
    protected void doDisconnect() {
        doClose();
    }

    @Override
    protected void doClose() {
        State old = state;
        state = State.CLOSED;
        ChannelPromise promise = connectPromise;
        if (promise != null) {
            connectPromise = null;
            promise.tryFailure(new ClosedChannelException());
        }
        if (connectTimeout != null) {
            connectTimeout.cancel(false);
            connectTimeout = null;
        }
        RdmaConnection c = connection;
        if (c != null && old == State.ACTIVE) {
            int linger = config.getSoLinger();
            if (linger == 0) {
                c.close(); // no end of stream: the peer sees a reset
            } else {
                if (!outputShutdown) {
                    window.sendEnd(c);
                }
                window.closeWhenDrained(c);
                if (linger > 0) {
                    try {
                        eventLoop().schedule(c::close, linger, TimeUnit.SECONDS);
                    } catch (RuntimeException e) {
                        c.close();
                    }
                }
            }
        }
        inbox.dropMessages();
        discardOrphans();
    }

    private final class RdmaUnsafe extends AbstractUnsafe implements RdmaIoHandle {

        @Override
        public void connect(SocketAddress remote, SocketAddress local, ChannelPromise promise) {
            // not marked uncancellable: a connect in progress can be cancelled
            if (promise.isDone() || !ensureOpen(promise)) {
                return;
            }
            try {
                if (connectPromise != null) {
                    throw new ConnectionPendingException();
                }
                if (state == State.ACTIVE) {
                    throw new AlreadyConnectedException();
                }
                if (local != null) {
                    throw new UnsupportedOperationException("rdma4j chooses the local address of a connection");
                }
                if (!(remote instanceof InetSocketAddress address)) {
                    throw new UnsupportedAddressTypeException();
                }
                RdmaTransport transport = registration.handler().transport();
                CompletableFuture<RdmaConnection> connecting = transport.connect(address);
                state = State.CONNECTING;
                connectPromise = promise;
                requestedRemote = remote;
                int timeoutMillis = config.getConnectTimeoutMillis();
                if (timeoutMillis > 0) {
                    connectTimeout = eventLoop().schedule(() -> {
                        ChannelPromise p = connectPromise;
                        if (p != null && p.tryFailure(new io.netty.channel.ConnectTimeoutException(
                                "connection timed out after " + timeoutMillis + " ms: " + remote))) {
                            connectPromise = null;
                            close(voidPromise());
                        }
                    }, timeoutMillis, TimeUnit.MILLISECONDS);
                }
                promise.addListener(f -> {
                    if (f.isCancelled()) {
                        if (connectTimeout != null) {
                            connectTimeout.cancel(false);
                        }
                        connectPromise = null;
                        close(voidPromise());
                    }
                });
                connecting.whenComplete((c, failure) -> post(new RdmaEvent.Connected(c, failure)));
            } catch (Throwable t) {
                promise.tryFailure(annotateConnectException(t, remote));
                closeIfClosed();
            }
        }

        @Override
        protected void flush0() {
            super.flush0();
        }

        void writeFailed(Throwable cause) {
            handleWriteError(cause);
        }

        @Override
        public void handle(IoRegistration registration, IoEvent event) {
            handle((RdmaEvent) event);
        }

        private void handle(RdmaEvent event) {
            RdmaSocketChannel.this.handle(event);
        }

        @Override
        public void orphaned(IoEvent event) {
            post(event);
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }
}
