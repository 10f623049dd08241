package io.rdma4j.netty;

import io.netty.channel.AbstractServerChannel;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.socket.ServerSocketChannel;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.channels.UnsupportedAddressTypeException;
import java.util.ArrayDeque;

/**
 * A listening channel over rdma4j's listener, for event loops of {@link RdmaIoHandler}: each accepted connection
 * becomes an {@link RdmaSocketChannel}. The listener is rdma4j's own, so its rules hold: off loopback it opens only
 * where peers must authenticate (a shared secret, mutual TLS) or {@code allow-unauthenticated} is set, and binding
 * fails with rdma4j's {@code ProtectedModeException} otherwise. Options: {@link RdmaServerSocketChannelConfig}.
 */
@SuppressWarnings("this-escape") // a Netty channel hands itself to its config and pipeline while built, as Netty's own do
public class RdmaServerSocketChannel extends AbstractServerChannel implements ServerSocketChannel {

    private final RdmaServerSocketChannelConfig config = new RdmaServerSocketChannelConfig(this);
    private final LoopLink link = new LoopLink(() -> !isOpen());
    private volatile RdmaListener listener;
    private volatile boolean closed;
    // loop thread only
    private RdmaTransport transport;
    private final ArrayDeque<RdmaConnection> accepted = new ArrayDeque<>();
    private boolean readRequested;
    private boolean readScheduled;

    public RdmaServerSocketChannel() {
    }

    @Override
    public RdmaServerSocketChannelConfig config() {
        return config;
    }

    @Override
    public boolean isOpen() {
        return !closed;
    }

    @Override
    public boolean isActive() {
        return !closed && listener != null;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return null;
    }

    @Override
    protected SocketAddress localAddress0() {
        RdmaListener l = listener;
        return l == null ? null : l.localAddress();
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(ServerUnsafe.class);
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new ServerUnsafe();
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        link.register((IoEventLoop) eventLoop(), (ServerUnsafe) unsafe(), promise, () -> transport = link.handler().transport());
    }

    @Override
    protected void doDeregister() {
        link.deregister();
    }

    private void post(IoEvent event) {
        link.post(event);
    }

    @Override
    protected void doBind(SocketAddress localAddress) {
        if (!(localAddress instanceof InetSocketAddress address)) {
            throw new UnsupportedAddressTypeException();
        }
        // rdma4j's listener: its protected mode, authentication and connection bounds apply as they are
        listener = transport.listen(address, connection -> post(new RdmaEvent.Accepted(connection)));
    }

    @Override
    protected void doBeginRead() {
        if (!isActive()) {
            return;
        }
        readRequested = true;
        if (!accepted.isEmpty() && !readScheduled) {
            readScheduled = true;
            post(new RdmaEvent.ReadNow());
        }
    }

    private void handle(RdmaEvent event) {
        switch (event) {
            case RdmaEvent.Accepted a -> {
                if (closed) {
                    a.discard();
                } else if (accepted.size() >= config.getBacklog()) {
                    a.discard(); // a full accept queue refuses the connection
                } else {
                    accepted.add(a.connection());
                    acceptLoop();
                }
            }
            case RdmaEvent.ReadNow n -> {
                readScheduled = false;
                acceptLoop();
            }
            default -> event.discard();
        }
    }

    private void acceptLoop() {
        if (!readRequested || accepted.isEmpty() || closed) {
            return;
        }
        var handle = unsafe().recvBufAllocHandle();
        handle.reset(config);
        var pipeline = pipeline();
        RdmaConnection c;
        do {
            c = accepted.poll();
            if (c == null) {
                break;
            }
            readRequested = false;
            handle.incMessagesRead(1);
            pipeline.fireChannelRead(new RdmaSocketChannel(this, c, transport));
        } while (handle.continueReading() && !closed);
        handle.readComplete();
        pipeline.fireChannelReadComplete();
    }

    @Override
    protected void doClose() {
        closed = true;
        RdmaListener l = listener;
        if (l != null) {
            l.close();
        }
        RdmaConnection c;
        while ((c = accepted.poll()) != null) {
            c.close();
        }
        link.discardOrphans();
    }

    private final class ServerUnsafe extends AbstractUnsafe implements RdmaIoHandle {

        @Override
        public void connect(SocketAddress remote, SocketAddress local, ChannelPromise promise) {
            safeSetFailure(promise, new UnsupportedOperationException("a server channel does not connect"));
        }

        @Override
        public void handle(IoRegistration registration, IoEvent event) {
            RdmaServerSocketChannel.this.handle((RdmaEvent) event);
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
