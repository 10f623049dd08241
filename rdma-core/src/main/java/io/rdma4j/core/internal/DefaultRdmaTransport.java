package io.rdma4j.core.internal;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProviderSelection;
import io.rdma4j.core.ConnectionPoller;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RegisteredMemoryLimitException;
import io.rdma4j.core.RegistrationException;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderListener;
import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.core.spi.ProviderTransport;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/** The transport every provider runs under: it owns the semantics that must not differ between providers. */
final class DefaultRdmaTransport implements RdmaTransport {

    private static final System.Logger LOG = System.getLogger(RdmaTransport.class.getName());
    private static final Set<String> ANNOUNCED = ConcurrentHashMap.newKeySet();

    private final TransportConfig config;
    private final ProviderSelection selection;
    private final ProviderTransport provider;
    private final TransportMetrics metrics;
    private final ListenerProtection protection;
    private final RegionIndex regions = new RegionIndex();
    private final Set<DefaultConnection> connections = ConcurrentHashMap.newKeySet();
    private final Set<ProviderListener> listeners = ConcurrentHashMap.newKeySet();
    private final List<RegisteredBufferPool> pools = new ArrayList<>();
    private final ScheduledThreadPoolExecutor timers;
    // User callbacks never run on provider I/O threads: a blocking callback must not stall progress.
    private final ExecutorService completions = Executors.newThreadPerTaskExecutor(
            Thread.ofVirtual().name("rdma4j-completion-", 0).factory());
    private final AtomicBoolean closed = new AtomicBoolean();
    /** Bytes of two-sided messages queued for the application on every open connection (see {@link MessageInbox}). */
    private final AtomicLong unreceivedMessageBytes = new AtomicLong();
    /** Set once the provider refused a read-only file mapping (see {@link #registerFile}). */
    private volatile boolean readOnlyMappingsRefused;

    private DefaultRdmaTransport(TransportConfig config, ProviderRegistry.Opened opened) {
        this.config = config;
        this.selection = opened.selection();
        this.provider = opened.transport();
        this.metrics = opened.metrics();
        this.protection = new ListenerProtection(config, provider, selection.provider());
        this.metrics.bufferedBytesFrom(() -> unreceivedMessageBytes.get() + provider.bufferedBytes());
        this.timers = new ScheduledThreadPoolExecutor(1, Thread.ofPlatform().daemon().name("rdma4j-timeouts").factory());
        this.timers.setRemoveOnCancelPolicy(true);
        // A task that is always due soon keeps the operations' timeouts (due much later) from ever heading the
        // queue, and a task scheduled at the head of an empty queue wakes the timer thread: once per operation.
        this.timers.scheduleAtFixedRate(() -> { }, 1, 1, TimeUnit.SECONDS);
    }

    static RdmaTransport open(TransportConfig config) {
        DefaultRdmaTransport t = new DefaultRdmaTransport(config, ProviderRegistry.open(providerConfig(config)));
        // One line per process and choice: components that open several transports do not repeat it.
        String line = "rdma4j transport on provider " + t.selection;
        LOG.log(ANNOUNCED.add(line) ? System.Logger.Level.INFO : System.Logger.Level.DEBUG, line);
        LOG.log(System.Logger.Level.DEBUG, () -> "rdma4j provider choice in detail: " + t.selection.reason());
        return t;
    }

    /**
     * The config the provider is opened with: its messages carry the transport's {@link MessageHeader} in front
     * of up to max-message-size bytes of body.
     */
    static TransportConfig providerConfig(TransportConfig config) {
        if (config.maxMessageSize() > Integer.MAX_VALUE - MessageHeader.SIZE) {
            throw new IllegalArgumentException("max-message-size " + config.maxMessageSize() + " leaves no room for the "
                    + MessageHeader.SIZE + "-byte message header; use at most " + (Integer.MAX_VALUE - MessageHeader.SIZE));
        }
        return config.toBuilder().maxMessageSize(config.maxMessageSize() + MessageHeader.SIZE).build();
    }

    @Override
    public ProviderSelection selection() {
        return selection;
    }

    @Override
    public TransportConfig config() {
        return config;
    }

    @Override
    public TransportMetrics metrics() {
        return metrics;
    }

    ScheduledThreadPoolExecutor timers() {
        return timers;
    }

    ExecutorService completions() {
        return completions;
    }

    AtomicLong unreceivedMessageBytes() {
        return unreceivedMessageBytes;
    }

    long maxOperationLength() {
        return provider.maxOperationLength();
    }

    @Override
    public RegisteredRegion register(MemorySegment segment, Set<Access> access) {
        checkOpen();
        if (!segment.isNative()) {
            throw new IllegalArgumentException("only native memory can be registered: allocate it from an Arena or map a file "
                    + "(heap memory moves with the garbage collector)");
        }
        if (segment.byteSize() == 0) {
            throw new IllegalArgumentException("cannot register an empty segment");
        }
        SharedMemory.require(segment, "a segment to register");
        Set<Access> rights = Access.normalize(access);
        if (segment.isReadOnly() && (rights.contains(Access.LOCAL_WRITE) || rights.contains(Access.REMOTE_WRITE))) {
            throw new IllegalArgumentException("a read-only segment can only be registered for REMOTE_READ, not " + rights);
        }
        ProviderRegion pr = provider.register(segment, rights);
        DefaultRegion region = new DefaultRegion(this, segment, rights, pr);
        regions.add(region);
        metrics.regionRegistered(segment.byteSize());
        return region;
    }

    @Override
    public RegisteredRegion registerFile(Path file, long length, Arena arena) {
        checkOpen();
        if (length <= 0) {
            throw new IllegalArgumentException("cannot register " + length + " bytes of " + file + ": the length must be positive");
        }
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = channel.size();
            if (length > size) {
                // a mapping past the end of a file faults (SIGBUS) on access
                throw new IllegalArgumentException(file + " has " + size + " bytes, fewer than the " + length + " to register");
            }
            if (!readOnlyMappingsRefused) {
                MemorySegment readOnly = channel.map(FileChannel.MapMode.READ_ONLY, 0, length, arena);
                try {
                    return register(readOnly, Access.remoteRead());
                } catch (RegisteredMemoryLimitException full) {
                    throw full; // a writable mapping counts the same against the limit
                } catch (RegistrationException refused) {
                    // the refused mapping stays in the caller's arena until it closes (once per transport)
                    readOnlyMappingsRefused = true;
                    LOG.log(System.Logger.Level.WARNING, "the " + provider() + " transport cannot register read-only file "
                            + "mappings (" + refused.getMessage() + "), as Linux kernels before 6.2 pin every region for "
                            + "writing; mapping files shared and writable from now on (the same page cache; nothing writes "
                            + "through the mapping)");
                }
            }
            try (FileChannel rw = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                return register(rw.map(FileChannel.MapMode.READ_WRITE, 0, length, arena), Access.remoteRead());
            } catch (java.nio.file.AccessDeniedException e) {
                throw new RegistrationException("cannot register " + file + " on the " + provider() + " transport: this kernel "
                        + "refuses read-only file mappings and the file cannot be opened for writing (" + e.getMessage()
                        + "); run on Linux 6.2 or later, or give this process write permission on the file", e);
            }
        } catch (IOException e) {
            throw new RegistrationException("cannot map " + file + ": " + e, e);
        }
    }

    void forget(DefaultRegion region) {
        regions.remove(region);
        if (lastLocalRegion == region) {
            lastLocalRegion = null;
        }
    }

    /** The region {@link #localRegion} found last; only a hint, re-checked on every use. */
    private volatile DefaultRegion lastLocalRegion;

    /** The live local region containing {@code segment} with {@code right} (any right when null). */
    DefaultRegion localRegion(MemorySegment segment, Access right) {
        if (!segment.isNative()) {
            throw new IllegalArgumentException("local buffers of RDMA operations must be native memory inside a registered region");
        }
        SharedMemory.require(segment, "the local buffer of an RDMA operation");
        // Callers tend to use one buffer (or one pool slab) over and over: try the last match first.
        DefaultRegion last = lastLocalRegion;
        if (last != null && last.isOpen() && last.contains(segment) && (right == null || last.access().contains(right))) {
            return last;
        }
        DefaultRegion r = regions.find(segment, candidate -> right == null || candidate.access().contains(right));
        if (r != null) {
            lastLocalRegion = r;
        }
        if (r == null) {
            throw new IllegalArgumentException("local buffer [0x" + Long.toHexString(segment.address()) + ", +" + segment.byteSize()
                    + ") is not inside a live region registered with this transport" + (right == null ? "" : " with " + right));
        }
        return r;
    }

    @Override
    public int registeredRegions() {
        return regions.size();
    }

    @Override
    public ConnectionPoller openPoller() {
        checkOpen();
        return new DefaultConnectionPoller(provider.openPoller().orElse(null));
    }

    @Override
    public RdmaListener listen(InetSocketAddress address, RequestHandlers handlers, Consumer<RdmaConnection> onAccept) {
        checkOpen();
        java.util.Objects.requireNonNull(handlers, "handlers");
        boolean unauthenticated = protection.check(address);
        ProviderListener pl = provider.listen(address, pc -> {
            if (closed.get()) {
                pc.close();
                return;
            }
            DefaultConnection c = adopt(pc, handlers);
            completions.execute(() -> {
                try {
                    onAccept.accept(c);
                } catch (RuntimeException e) {
                    LOG.log(System.Logger.Level.WARNING, "accept handler failed for " + c, e);
                }
            });
        });
        listeners.add(pl);
        if (unauthenticated) {
            protection.listening(pl.localAddress());
        }
        return new RdmaListener() {
            @Override
            public InetSocketAddress localAddress() {
                return pl.localAddress();
            }

            @Override
            public void close() {
                listeners.remove(pl);
                pl.close();
            }

            @Override
            public String toString() {
                return "RdmaListener[" + selection.provider() + " " + pl.localAddress() + "]";
            }
        };
    }

    @Override
    public CompletableFuture<RdmaConnection> connect(InetSocketAddress address) {
        checkOpen();
        return CompletableFuture.supplyAsync(() -> adopt(provider.connect(address, config.connectTimeout()), RequestHandlers.none()), completions);
    }

    private DefaultConnection adopt(ProviderConnection pc, RequestHandlers handlers) {
        DefaultConnection c = new DefaultConnection(this, pc, handlers);
        connections.add(c);
        metrics.connectionOpened();
        pc.start(c);
        if (closed.get()) {
            c.close();
        }
        return c;
    }

    void connectionClosed(DefaultConnection c) {
        if (connections.remove(c)) {
            metrics.connectionClosed();
        }
    }

    @Override
    public synchronized RegisteredBufferPool createBufferPool(PoolConfig poolConfig) {
        checkOpen();
        RegisteredBufferPool pool = new SlabBufferPool(this, poolConfig);
        pools.add(pool);
        return pool;
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new ConnectionClosedException("transport is closed");
        }
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        for (ProviderListener l : listeners) {
            quietly(l::close);
        }
        listeners.clear();
        for (DefaultConnection c : connections) {
            quietly(c::close);
        }
        synchronized (this) {
            pools.forEach(p -> quietly(p::close));
            pools.clear();
        }
        for (DefaultRegion r : regions.all()) {
            quietly(r::close);
        }
        quietly(provider::close);
        timers.shutdownNow();
        completions.shutdown();
        LOG.log(System.Logger.Level.DEBUG, "rdma4j transport closed");
    }

    private static void quietly(Runnable action) {
        try {
            action.run();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "error while closing rdma4j transport", e);
        }
    }

    @Override
    public String toString() {
        return "RdmaTransport[" + selection + "]";
    }
}
