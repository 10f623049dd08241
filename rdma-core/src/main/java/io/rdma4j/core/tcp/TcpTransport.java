package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RegisteredMemoryLimitException;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderListener;
import io.rdma4j.core.spi.ProviderPoller;
import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.core.spi.ProviderTransport;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
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
    /** Responses queued and not yet written on every connection: with the unreceived messages, the budget's use. */
    private final AtomicLong unsentResponseBytes = new AtomicLong();
    /** Messages admitted by a reader and not yet in the application's inbox (see ReadBounds#admitMessage). */
    private final AtomicLong admittedMessageBytes = new AtomicLong();
    /** Bytes the live regions span, against tcp.max-registered-bytes. */
    private final AtomicLong registeredBytes = new AtomicLong();

    TcpTransport(TransportConfig config, TcpOptions options, TransportMetrics metrics) {
        this.config = config;
        this.options = options;
        this.metrics = metrics;
        this.timers = new ScheduledThreadPoolExecutor(1, Thread.ofPlatform().daemon().name("rdma4j-tcp-timers").factory());
        this.timers.setRemoveOnCancelPolicy(true);
        long sweep = Math.max(25, Math.min(1000, options.idleTimeout().toMillis() / 8));
        this.timers.scheduleWithFixedDelay(this::sweepIdle, sweep, sweep, TimeUnit.MILLISECONDS);
    }

    private void sweepIdle() {
        long now = System.nanoTime();
        for (TcpConnection c : connections) {
            try {
                c.checkIdle(now);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "idle check of " + c + " failed", e);
            }
        }
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

    AtomicLong unsentResponseBytes() {
        return unsentResponseBytes;
    }

    AtomicLong admittedMessageBytes() {
        return admittedMessageBytes;
    }

    @Override
    public long bufferedBytes() {
        return unsentResponseBytes.get() + admittedMessageBytes.get();
    }

    /** Open connections: each one's share of tcp.max-buffered-bytes is the budget divided by their number. */
    int connectionCount() {
        return connections.size();
    }

    // ---- registration ----

    @Override
    public ProviderRegion register(MemorySegment segment, Set<Access> access) {
        checkOpen();
        long bytes = segment.byteSize();
        // added only if it fits, so a refused registration never makes a concurrent one that fits look too large
        long before;
        long total;
        do {
            before = registeredBytes.get();
            total = before + bytes;
            if (total < 0 || total > options.maxRegisteredBytes()) {
                throw new RegisteredMemoryLimitException("registering " + bytes + " bytes would take this tcp transport's "
                        + "registered memory to " + (total < 0 ? "more than " + Long.MAX_VALUE : total) + " bytes, past "
                        + "tcp.max-registered-bytes=" + options.maxRegisteredBytes() + " (the tcp provider's RLIMIT_MEMLOCK): "
                        + "raise it, or close regions no longer read");
            }
        } while (!registeredBytes.compareAndSet(before, total));
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

    /** Once per region, as it closes. */
    void forget(TcpRegion region) {
        if (regions.remove(region.key(), region)) {
            registeredBytes.addAndGet(-region.segment().byteSize());
        }
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

    /** Counts and logs a refused request or peer ({@link TransportMetrics#recordRejected}). */
    void rejected(String what) {
        metrics.recordRejected(LOG, () -> "rdma4j tcp rejected: " + what);
    }

    // ---- connections ----

    /** Mutual TLS: a listener requires and checks each connecting side's certificate. */
    @Override
    public boolean authenticatesPeers() {
        return options.tls() != null && options.tls().requireClient();
    }

    @Override
    public ProviderListener listen(InetSocketAddress address, Consumer<ProviderConnection> onConnection) {
        checkOpen();
        if (options.tls() != null && !options.tls().hasKey()) {
            throw new IllegalArgumentException("listening with tcp.tls=true needs tcp.tls.key-store (this side's"
                    + " certificate and key)");
        }
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
            FrameChannel frames = TcpHandshake.run(channel, true, config.sharedSecretValue(), options.tls(),
                    left.isNegative() || left.isZero() ? Duration.ofMillis(1) : left, timers, address);
            return adopt(channel, frames, () -> { });
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

    private TcpConnection adopt(SocketChannel channel, FrameChannel frames, Runnable releaseSlot) throws IOException {
        TcpConnection c = new TcpConnection(this, channel, frames, releaseSlot);
        connections.add(c);
        if (closed.get()) {
            c.close();
            throw new ConnectionClosedException("tcp provider is closed");
        }
        return c;
    }

    void connectionClosed(TcpConnection connection) {
        connections.remove(connection);
        connection.releaseSlot();
    }

    @Override
    public Optional<ProviderPoller> openPoller() {
        try {
            return Optional.of(new TcpPoller(timers));
        } catch (IOException e) {
            throw new RdmaException("could not open a selector for an event loop's poller: " + e.getMessage(), e);
        }
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

    /**
     * Accepts on a virtual thread; each accepted socket does its handshake on its own virtual thread. Admits at
     * most tcp.max-connections connections and tcp.max-connections-per-address from one remote IP, of which at most
     * tcp.max-handshakes (and tcp.max-handshakes-per-address) may still be in their handshake: a new socket displaces
     * the oldest half-open one rather than find the listener full ({@link ListenerSlots}). Refused and displaced
     * sockets are closed at once, counted and logged. Accept errors (such as running out of file descriptors) back
     * off instead of spinning.
     */
    private final class Listener implements ProviderListener {
        private static final long MIN_BACKOFF_MILLIS = 10;
        private static final long MAX_BACKOFF_MILLIS = 1000;

        private final ServerSocketChannel server;
        private final Consumer<ProviderConnection> onConnection;
        private final InetSocketAddress localAddress;
        private final ListenerSlots slots = new ListenerSlots(options.maxConnections(), options.maxConnectionsPerAddress(),
                options.maxHandshakes(), options.maxHandshakesPerAddress());

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
            long backoff = 0;
            while (server.isOpen()) {
                SocketChannel channel;
                try {
                    channel = server.accept();
                    backoff = 0;
                } catch (ClosedChannelException e) {
                    return;
                } catch (IOException e) {
                    backoff = Math.min(MAX_BACKOFF_MILLIS, Math.max(MIN_BACKOFF_MILLIS, backoff * 2));
                    LOG.log(System.Logger.Level.WARNING, "accept failed on " + localAddress + "; retrying in " + backoff
                            + " ms: " + e.getMessage());
                    try {
                        Thread.sleep(backoff);
                    } catch (InterruptedException interrupted) {
                        return;
                    }
                    continue;
                }
                InetAddress from = remoteIp(channel);
                ListenerSlots.Admission admission = slots.admit(from, () -> closeQuietly(channel));
                for (ListenerSlots.Claim displaced : admission.evicted()) {
                    // Counted before the peer can see the close, so whoever watches the peer sees the count too.
                    rejected("half-open connection from " + displaced.from + " on " + localAddress + " closed to admit a"
                            + " newer one: the handshakes in progress reached tcp.max-handshakes or"
                            + " tcp.max-handshakes-per-address");
                    metrics.handshakeDisplaced();
                    ListenerSlots.evict(displaced);
                }
                if (admission.claim() == null) {
                    rejected("connection from " + from + " on " + localAddress + " closed at accept: " + admission.refusal());
                    closeQuietly(channel);
                    continue;
                }
                Thread.ofVirtual().name("rdma4j-tcp-handshake").start(() -> admit(channel, admission.claim()));
            }
        }

        private InetAddress remoteIp(SocketChannel channel) {
            try {
                return ((InetSocketAddress) channel.getRemoteAddress()).getAddress();
            } catch (IOException | RuntimeException e) {
                return InetAddress.getLoopbackAddress();
            }
        }

        private void admit(SocketChannel channel, ListenerSlots.Claim claim) {
            String peer = String.valueOf(claim.from);
            TcpConnection c = null;
            Runnable releaseSlot = () -> slots.release(claim);
            try {
                InetSocketAddress remote = (InetSocketAddress) channel.getRemoteAddress();
                peer = String.valueOf(remote);
                channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
                FrameChannel frames = TcpHandshake.run(channel, false, config.sharedSecretValue(), options.tls(),
                        options.handshakeTimeout(), timers, remote);
                if (!slots.established(claim)) {
                    throw new ConnectionClosedException("displaced by newer connections while in its handshake");
                }
                c = adopt(channel, frames, releaseSlot);
                onConnection.accept(c);
            } catch (IOException | RuntimeException e) {
                // A displaced socket was counted when it was displaced; the failure that follows is its close.
                if (!closed.get() && !slots.displaced(claim)) {
                    rejected("connection from " + peer + " on " + localAddress + ": " + e.getMessage());
                }
                if (c != null) {
                    c.close();
                }
                closeQuietly(channel);
                releaseSlot.run();
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
