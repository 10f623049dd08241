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
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.internal.StringUtil;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.nio.channels.UnsupportedAddressTypeException;
import java.util.concurrent.Executor;

/**
 * A stream channel over one rdma4j connection, for event loops of {@link RdmaIoHandler}: Netty's
 * {@code SocketChannel} with rdma4j's two-sided messages underneath. Written bytes go out as messages of up to
 * max-message-size (small flushed buffers gathered into one); rdma4j reads each received message into a buffer of the
 * channel's allocator, which the pipeline gets without a further copy. An empty message marks the end of a side's stream, so {@link #shutdownOutput()}
 * is a half-close the peer sees as end of input, and a connection that closes without it is a reset. A client whose
 * peer does not run rdma4j talks to it over a plain TCP socket instead ({@link RdmaChannelOption#TCP_FALLBACK}).
 * Options: {@link RdmaSocketChannelConfig}.
 */
@SuppressWarnings("this-escape") // a Netty channel hands itself to its config and pipeline while built, as Netty's own do
public class RdmaSocketChannel extends AbstractChannel implements SocketChannel {

    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);

    private enum State { OPEN, CONNECTING, ACTIVE, CLOSED }

    private final RdmaSocketChannelConfig config = new RdmaSocketChannelConfig(this);
    private final ReceiveMemory receiveMemory = new ReceiveMemory(() -> config().getAllocator());
    private final Inbox inbox = new Inbox(this::post, receiveMemory);
    private final StreamReader reader = new StreamReader(this, inbox);
    private final LoopLink link = new LoopLink(() -> !isOpen());
    private volatile State state;
    private volatile RdmaConnection connection;
    /** Instead of {@link #connection}: plain TCP to a peer that does not run rdma4j ({@link RdmaChannelOption#TCP_FALLBACK}). */
    private volatile PlainSocket plain;
    private volatile boolean inputShutdown;
    private volatile boolean outputShutdown;
    // loop thread only
    private int maxMessageSize;
    private SendWindow window;
    private MessageWriter writer;
    private PendingConnect pendingConnect;

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
        connection.useReceiveBuffers(receiveMemory);
        this.maxMessageSize = transport.config().maxMessageSize();
        int window = config.getSendBufferSize() > 0 ? config.getSendBufferSize()
                : Math.max(RdmaSocketChannelConfig.DEFAULT_SEND_WINDOW, 4 * maxMessageSize);
        this.window = new SendWindow(window, transport.config().maxOutstandingOperations(), this::post);
        this.writer = new MessageWriter(this, connection, this.window, maxMessageSize);
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
        PlainSocket p = plain;
        return c != null ? c.localAddress() : p != null ? p.localAddress() : null;
    }

    @Override
    protected SocketAddress remoteAddress0() {
        RdmaConnection c = connection;
        PlainSocket p = plain;
        return c != null ? c.remoteAddress() : p != null ? p.remoteAddress() : null;
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
        link.register((IoEventLoop) eventLoop(), (RdmaUnsafe) unsafe(), promise, () -> {
            if (plain != null) {
                watchPlain();
            } else if (state == State.ACTIVE) {
                link.handler().attach(connection);
                inbox.pump(connection);
            }
        });
    }

    @Override
    protected void doDeregister() {
        PlainSocket p = plain;
        if (p != null) {
            p.deregister();
        }
        RdmaConnection c = connection;
        if (c != null && link.registered()) {
            link.handler().detach(c);
        }
        link.deregister();
    }

    /** From any thread: hands {@code event} to the loop the channel is registered with. */
    void post(IoEvent event) {
        link.post(event);
    }

    private void handle(RdmaEvent event) {
        switch (event) {
            case RdmaEvent.Received r -> {
                if (state == State.ACTIVE) {
                    reader.received(r.message(), r.failure());
                } else {
                    r.discard();
                }
            }
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
            case RdmaEvent.ReadNow n -> reader.readNow();
            case RdmaEvent.Accepted a -> a.discard();
            case RdmaEvent.Run r -> r.task().run();
        }
    }

    // ---- reading: StreamReader ----

    @Override
    protected void doBeginRead() {
        if (state == State.ACTIVE) {
            if (plain != null) {
                plain.beginRead();
            } else {
                reader.beginRead();
            }
        }
    }

    void autoReadCleared() {
        if (plain != null) {
            plain.autoReadCleared();
        } else {
            reader.autoReadCleared();
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
        if (plain != null) {
            plain.write(in);
        } else {
            writer.write(in, link.handler());
        }
    }

    /** The socket has room again, or rdma4j is done with bytes sent in place: writes what waits in the outbound buffer. */
    void flushNow() {
        if (state == State.ACTIVE) {
            ((RdmaUnsafe) unsafe()).flush0();
        }
    }

    @Override
    protected void doShutdownOutput() throws IOException {
        if (!outputShutdown) {
            outputShutdown = true;
            if (state == State.ACTIVE && plain != null) {
                plain.shutdownOutput();
            } else if (state == State.ACTIVE) {
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
            if (plain != null) {
                plain.shutdownInput();
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

    RdmaConnection connection() {
        return connection;
    }

    boolean inputShutdown() {
        return inputShutdown;
    }

    void markInputShutdown() {
        inputShutdown = true;
    }

    void closeNow() {
        unsafe().close(unsafe().voidPromise());
    }

    private void connected(RdmaConnection c, Throwable failure) {
        PendingConnect pending = pendingConnect;
        pendingConnect = null;
        if (failure != null) {
            if (pending != null && state == State.CONNECTING) {
                pendingConnect = pending; // the plain connect may complete before fallBack returns
                if (pending.fallBack(failure, this, link.handler().transport(), this::adoptPlain, this::plainConnected)) {
                    return;
                }
                pendingConnect = null;
            }
            if (pending != null && pending.fail(failure)) {
                closeNow();
            }
            return;
        }
        ChannelPromise promise = pending == null ? null : pending.end();
        if (promise == null || state != State.CONNECTING) {
            c.close(); // closed, timed out or cancelled meanwhile
            return;
        }
        start(c, link.handler().transport());
        link.handler().attach(c);
        boolean promiseSet = promise.trySuccess();
        pipeline().fireChannelActive();
        if (!promiseSet) {
            closeNow();
            return;
        }
        inbox.pump(c);
    }

    /** The connect goes on over plain TCP: the channel's I/O is {@code socket}'s from now on. */
    private void adoptPlain(PlainSocket socket) {
        plain = socket;
        if (link.registered()) {
            watchPlain();
        }
    }

    private void watchPlain() {
        try {
            plain.register(link.handler());
        } catch (IOException e) {
            closeNow(); // the socket closed meanwhile
        }
    }

    private void plainConnected(Throwable failure) {
        PendingConnect pending = pendingConnect;
        pendingConnect = null;
        if (failure != null) {
            if (pending != null && state == State.CONNECTING) {
                PlainSocket p = plain;
                pendingConnect = pending;
                if (pending.tryRdma4jInstead(link.handler().transport(), this::post)) {
                    plain = null;
                    if (p != null) { // null when the socket could not be opened
                        p.close(false);
                    }
                    return;
                }
                pendingConnect = null;
            }
            if (pending != null && pending.fail(failure)) {
                closeNow();
            }
            return;
        }
        ChannelPromise promise = pending == null ? null : pending.endConnectedOverPlainTcp();
        if (promise == null || state != State.CONNECTING) {
            return; // closed, timed out or cancelled meanwhile: the close closed the socket
        }
        state = State.ACTIVE;
        boolean promiseSet = promise.trySuccess();
        pipeline().fireChannelActive();
        if (!promiseSet) {
            closeNow();
        }
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
        ChannelPromise promise = pendingConnect == null ? null : pendingConnect.end();
        if (promise != null) {
            promise.tryFailure(new ClosedChannelException());
        }
        PlainSocket p = plain;
        if (p != null) {
            p.close(config.getSoLinger() == 0);
        }
        RdmaConnection c = connection;
        if (c != null && old == State.ACTIVE) {
            window.close(c, config.getSoLinger(), outputShutdown, this::eventLoop);
        }
        inbox.dropMessages();
        if (c != null && old == State.ACTIVE) {
            inbox.drainUntilClosed(c);
        }
        link.discardOrphans();
    }

    private final class RdmaUnsafe extends AbstractUnsafe implements RdmaIoHandle {

        @Override
        public void connect(SocketAddress remote, SocketAddress local, ChannelPromise promise) {
            // not marked uncancellable: a connect in progress can be cancelled
            if (promise.isDone() || !ensureOpen(promise)) {
                return;
            }
            try {
                if (pendingConnect != null) {
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
                pendingConnect = PendingConnect.start(RdmaSocketChannel.this, link.handler().transport(), address,
                        promise, () -> close(voidPromise()), RdmaSocketChannel.this::post);
                state = State.CONNECTING;
            } catch (Throwable t) {
                promise.tryFailure(annotateConnectException(t, remote));
                closeIfClosed();
            }
        }

        @Override
        protected void flush0() {
            super.flush0();
        }

        /** A close waits until rdma4j no longer reads the buffers sent in place, so that their writes succeed. */
        @Override
        protected Executor prepareToClose() {
            Executor held = state == State.ACTIVE && plain == null ? writer.closeAfterSendsInPlace(config.getSoLinger(), outputShutdown) : null;
            if (held != null) {
                reader.stop(); // nothing is read once the close began, as NIO deregisters before a lingering close
            }
            return held;
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

        /** The loop shuts down: a close held for sends in place goes on now. */
        @Override
        public void close() {
            if (writer != null) {
                writer.releaseHeldClose();
            }
            close(voidPromise());
        }
    }
}
