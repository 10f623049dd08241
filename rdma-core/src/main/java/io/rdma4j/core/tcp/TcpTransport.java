package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderListener;
import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.core.spi.ProviderTransport;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/** The opened tcp provider: the key table, listeners and connections. */
final class TcpTransport implements ProviderTransport {

    private static final System.Logger LOG = System.getLogger(TcpTransport.class.getName());

    private final TransportConfig config;
    private final TcpOptions options;
    private final TransportMetrics metrics;
    private final SecureRandom random = new SecureRandom();
    private final Map<Long, TcpRegion> regions = new ConcurrentHashMap<>();
    private final Set<TcpConnection> connections = ConcurrentHashMap.newKeySet();
    private final Set<Listener> listeners = ConcurrentHashMap.newKeySet();
    private final ScheduledThreadPoolExecutor timers;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final AtomicLong lastWarning = new AtomicLong(System.nanoTime() - 2_000_000_000L);

    TcpTransport(TransportConfig config, TcpOptions options, TransportMetrics metrics) {
        this.config = config;
        this.options = options;
        this.metrics = metrics;
        this.timers = new ScheduledThreadPoolExecutor(1, Thread.ofPlatform().daemon().name("rdma4j-tcp-handshake").factory());
        this.timers.setRemoveOnCancelPolicy(true);
    }

    TransportConfig config() {
        return config;
    }

    TcpOptions options() {
        return options;
    }

    TransportMetrics metrics() {
        return metrics;
    }

    // ---- registration ----

    @Override
    public ProviderRegion register(MemorySegment segment, Set<Access> access) {
        checkOpen();
        while (true) {
            long key = random.nextLong();
            if (key == 0) {
                continue;
            }
            TcpRegion region = new TcpRegion(this, segment, access, key);
            if (regions.putIfAbsent(key, region) == null) {
                return region;
            }
        }
    }

    void forget(TcpRegion region) {
        regions.remove(region.key(), region);
    }

    /**
     * Checks a peer's request against the live registration and pins the region for serving.
     *
     * @throws RemoteAccessException saying why the request is refused
     */
    TcpRegion authorize(TcpConnection connection, long key, long address, long length, Access right) {
        if (length < 0) {
            throw new RemoteAccessException(RemoteAccessException.Reason.OUT_OF_RANGE, "negative length " + length);
        }
        if (length > options.maxRequestBytes()) {
            throw new RemoteAccessException(RemoteAccessException.Reason.TOO_LARGE, "request of " + length
                    + " bytes exceeds the responder's tcp.max-request-bytes " + options.maxRequestBytes());
        }
        TcpRegion region = regions.get(key);
        if (region == null) {
            throw new RemoteAccessException(RemoteAccessException.Reason.UNKNOWN_KEY,
                    "no live region has this key (forged, or the region was deregistered)");
        }
        MemorySegment s = region.segment();
        long start = s.address();
        long end = start + s.byteSize();
        if (address < start || address > end || length > end - address) {
            throw new RemoteAccessException(RemoteAccessException.Reason.OUT_OF_RANGE, "range [0x" + Long.toHexString(address)
                    + ", +" + length + ") is outside the registered region [0x" + Long.toHexString(start) + ", +" + s.byteSize() + ")");
        }
        if (!region.allows(right)) {
            throw new RemoteAccessException(RemoteAccessException.Reason.ACCESS_DENIED,
                    "the region was not registered with " + right);
        }
        if (!region.pin(connection)) {
            throw new RemoteAccessException(RemoteAccessException.Reason.UNKNOWN_KEY, "the region was deregistered");
        }
        return region;
    }

    /** Counts and logs a refused request or peer; warns at most once a second so a hostile peer cannot flood logs. */
    void rejected(String what) {
        metrics.recordRejected();
        long now = System.nanoTime();
        long last = lastWarning.get();
        boolean warn = now - last > 1_000_000_000L && lastWarning.compareAndSet(last, now);
        LOG.log(warn ? System.Logger.Level.WARNING : System.Logger.Level.DEBUG, "rdma4j tcp rejected: " + what);
    }

    // ---- connections ----

    @Override
    public ProviderListener listen(InetSocketAddress address, Consumer<ProviderConnection> onConnection) {
        checkOpen();
        ServerSocketChannel server;
        try {
            server = ServerSocketChannel.open();
            server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            server.bind(address, 1024);
        } catch (IOException e) {
            throw new RdmaException("cannot listen on " + address + ": " + e.getMessage(), e);
        }
        Listener listener = new Listener(server, onConnection);
        listeners.add(listener);
        listener.start();
        return listener;
    }

    @Override
    public ProviderConnection connect(InetSocketAddress address, Duration timeout) {
        checkOpen();
        SocketChannel channel = null;
        try {
            channel = SocketChannel.open();
            channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
            long start = System.nanoTime();
            channel.socket().connect(address, (int) Math.max(1, Math.min(Integer.MAX_VALUE, timeout.toMillis())));
            Duration left = timeout.minusNanos(System.nanoTime() - start);
            TcpHandshake.run(channel, true, config.sharedSecretValue(), left.isNegative() || left.isZero()
                    ? Duration.ofMillis(1) : left, timers, address.toString());
            return adopt(channel);
        } catch (SocketTimeoutException e) {
            closeQuietly(channel);
            throw new RdmaTimeoutException("connect to " + address + " did not finish within " + timeout);
        } catch (IOException e) {
            closeQuietly(channel);
            throw new ConnectionClosedException("cannot connect to " + address + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeQuietly(channel);
            throw e;
        }
    }

    private TcpConnection adopt(SocketChannel channel) throws IOException {
        TcpConnection c = new TcpConnection(this, channel);
        connections.add(c);
        if (closed.get()) {
            c.close();
            throw new ConnectionClosedException("tcp provider is closed");
        }
        return c;
    }

    void connectionClosed(TcpConnection connection) {
        connections.remove(connection);
    }

    @Override
    public long maxOperationLength() {
        return options.maxRequestBytes();
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new ConnectionClosedException("tcp provider is closed");
        }
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        listeners.forEach(Listener::close);
        connections.forEach(TcpConnection::close);
        regions.values().forEach(TcpRegion::close);
        timers.shutdownNow();
    }

    private static void closeQuietly(SocketChannel channel) {
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException ignored) {
                // already failing
            }
        }
    }

    /** Accepts on a virtual thread; each accepted socket does its handshake on its own virtual thread. */
    private final class Listener implements ProviderListener {
        private final ServerSocketChannel server;
        private final Consumer<ProviderConnection> onConnection;
        private final InetSocketAddress localAddress;

        Listener(ServerSocketChannel server, Consumer<ProviderConnection> onConnection) {
            this.server = server;
            this.onConnection = onConnection;
            try {
                this.localAddress = (InetSocketAddress) server.getLocalAddress();
            } catch (IOException e) {
                throw new RdmaException("listener lost its address", e);
            }
        }

        void start() {
            Thread.ofVirtual().name("rdma4j-tcp-accept-" + localAddress.getPort()).start(this::acceptLoop);
        }

        private void acceptLoop() {
            while (server.isOpen()) {
                SocketChannel channel;
                try {
                    channel = server.accept();
                } catch (ClosedChannelException e) {
                    return;
                } catch (IOException e) {
                    LOG.log(System.Logger.Level.WARNING, "accept failed on " + localAddress, e);
                    continue;
                }
                Thread.ofVirtual().name("rdma4j-tcp-handshake").start(() -> admit(channel));
            }
        }

        private void admit(SocketChannel channel) {
            String peer = "peer";
            TcpConnection c = null;
            try {
                peer = String.valueOf(channel.getRemoteAddress());
                channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
                TcpHandshake.run(channel, false, config.sharedSecretValue(), config.connectTimeout(), timers, peer);
                c = adopt(channel);
                onConnection.accept(c);
            } catch (IOException | RuntimeException e) {
                if (c != null) {
                    c.close();
                }
                closeQuietly(channel);
                if (!closed.get()) {
                    rejected("connection from " + peer + " on " + localAddress + ": " + e.getMessage());
                }
            }
        }

        @Override
        public InetSocketAddress localAddress() {
            return localAddress;
        }

        @Override
        public void close() {
            listeners.remove(this);
            try {
                server.close();
            } catch (IOException e) {
                LOG.log(System.Logger.Level.DEBUG, "closing listener " + localAddress, e);
            }
        }
    }
}
