package io.rdma4j.core.verbs;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RegisteredMemoryLimitException;
import io.rdma4j.core.RegistrationException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderListener;
import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.core.spi.ProviderTransport;
import io.rdma4j.nativeloader.Errno;
import io.rdma4j.nativeloader.MemlockLimit;
import io.rdma4j.nativeloader.NativeCallException;
import io.rdma4j.nativeloader.RdmaCm;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.discovery.SelectionResult;

import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * An opened verbs provider: the device ({@link VerbsDevice}), the thread that handles rdma_cm events
 * ({@link CmEventLoop}), the progress thread that polls the connections' CQs ({@link ProgressLoop}), and
 * the connections and listeners made through them. Closing closes the listeners, then the connections
 * (which the progress thread tears down), then the threads, then the device.
 */
final class VerbsTransport implements ProviderTransport {

    private static final System.Logger LOG = System.getLogger(VerbsTransport.class.getName());
    private static final int LISTEN_BACKLOG = 128;
    /** Connects tried on new local ports when the port rdma_connect was to use is taken. */
    private static final int MAX_CONNECT_ATTEMPTS = 3;
    /** How long close lets connections drain before the progress thread tears them down regardless. */
    private static final Duration CLOSE_GRACE = Duration.ofSeconds(10);

    final TransportConfig config;
    final TransportMetrics metrics;
    final SelectionResult.Selection selection;
    final VerbsOptions options;
    final InetAddress localAddress;
    final VerbsDevice device;
    final CmEventLoop cmEvents;
    final ProgressLoop progress;
    /** Every connection's receives, on one shared receive queue. */
    final ReceivePool receives;
    /** Where every connection's receives complete. */
    final ReceiveCompletions receiveCompletions;
    /** Every connection's send staging slots. */
    final StagingPool staging;
    final DeviceEvents deviceEvents;
    /** Connections being set up (not yet polled). */
    private final Set<VerbsConnection> settingUp = ConcurrentHashMap.newKeySet();
    private final Set<VerbsListener> listeners = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean closed = new AtomicBoolean();
    /** Until close has closed every connection: connect requests are still accepted. */
    private volatile boolean running = true;

    private VerbsTransport(TransportConfig config, VerbsOptions options, TransportMetrics metrics,
                           SelectionResult.Selection selection, InetAddress localAddress, VerbsDevice device,
                           ReceivePool receives, ReceiveCompletions receiveCompletions) {
        this.config = config;
        this.options = options;
        this.metrics = metrics;
        this.selection = selection;
        this.localAddress = localAddress;
        this.device = device;
        this.receives = receives;
        this.receiveCompletions = receiveCompletions;
        metrics.lentReceiveCreditsFrom(receives.shared()::lent);
        this.staging = new StagingPool(device.pd, MessageChannel.HEADER + MessageChannel.FRAGMENT_PAYLOAD, metrics);
        this.deviceEvents = new DeviceEvents(device.context, selection.device().name(), receiveCompletions::connection);
        this.cmEvents = new CmEventLoop(device.eventChannel);
        this.progress = new ProgressLoop(device.completionChannel, receiveCompletions, options.busyPoll());
    }

    static VerbsTransport open(TransportConfig config, VerbsOptions options, TransportMetrics metrics,
                               SelectionResult.Selection selection) {
        InetAddress local = localAddress(config, selection);
        VerbsDevice device;
        try {
            device = VerbsDevice.open(selection, local);
        } catch (NativeCallException e) {
            throw new ProviderUnavailableException("verbs provider cannot open " + selection.device().name() + ": "
                    + e.getMessage(), e);
        }
        ReceivePool receives;
        try {
            receives = ReceivePool.create(device.context, device.pd, selection.device().name(),
                    MessageChannel.slotSize(config.maxMessageSize()), metrics);
        } catch (RuntimeException e) {
            device.close();
            throw e;
        }
        ReceiveCompletions receiveCompletions;
        try {
            receiveCompletions = ReceiveCompletions.create(device, receives);
        } catch (RuntimeException e) {
            receives.close();
            device.close();
            throw e;
        }
        return new VerbsTransport(config, options, metrics, selection, local, device, receives, receiveCompletions);
    }

    /** The IPv4 address cm ids bind to: configured, else the RoCE GID's, else the device's net device's. */
    static InetAddress localAddress(TransportConfig config, SelectionResult.Selection s) {
        if (config.localAddress() != null) {
            InetAddress a = VerbsProvider.parseAddress(config.localAddress());
            if (!(a instanceof Inet4Address)) {
                throw new ProviderUnavailableException("the verbs provider supports IPv4 addresses only, got " + a);
            }
            return a;
        }
        if (s.gid().ipv4().isPresent()) {
            return s.gid().ipv4().get();
        }
        List<String> netdevs = new ArrayList<>(s.port().netdevs());
        netdevs.addAll(s.device().netdevs());
        for (String name : netdevs) {
            try {
                NetworkInterface ni = NetworkInterface.getByName(name);
                if (ni != null) {
                    for (InetAddress a : ni.inetAddresses().toList()) {
                        if (a instanceof Inet4Address) {
                            return a;
                        }
                    }
                }
            } catch (SocketException e) {
                // try the next one
            }
        }
        throw new ProviderUnavailableException("cannot tell which IPv4 address " + s.device().name()
                + " uses (net devices: " + (netdevs.isEmpty() ? "none known" : String.join(", ", netdevs))
                + "): set the rdma4j 'address' option to the IP address of its net device");
    }

    // ---- registration ----

    @Override
    public ProviderRegion register(MemorySegment segment, Set<Access> access) {
        checkOpen();
        return new VerbsRegion(registerOrExplain(device.pd, segment, VerbsAccess.flags(access, device.iwarp)));
    }

    /** {@code ibv_reg_mr}, its failure explained ({@link #registrationFailure}). */
    static Verbs.MemoryRegion registerOrExplain(MemorySegment pd, MemorySegment segment, int flags) {
        try {
            return Verbs.registerMemory(pd, segment.address(), segment.byteSize(), flags);
        } catch (NativeCallException e) {
            throw registrationFailure(segment.byteSize(), e.errno());
        }
    }

    static RegistrationException registrationFailure(long bytes, int errno) {
        String what = "ibv_reg_mr of " + bytes + " bytes failed: " + Errno.name(errno);
        if (errno == Errno.ENOMEM || errno == Errno.EPERM || errno == Errno.EAGAIN) {
            String limit = MemlockLimit.current().map(MemlockLimit::toString).orElse("memlock limit unknown");
            return new RegisteredMemoryLimitException(what + ": registered memory is pinned and counts against RLIMIT_MEMLOCK ("
                    + limit + "); raise it: `ulimit -l unlimited` in the shell, LimitMEMLOCK=infinity for systemd services, "
                    + "`* - memlock unlimited` in /etc/security/limits.conf, or `--ulimit memlock=-1` for containers");
        }
        if (errno == 14 /* EFAULT */) {
            return new RegistrationException(what + ": the memory is not mapped, or it is a read-only shared mapping "
                    + "(FileChannel.MapMode.READ_ONLY), which kernels before 6.2 cannot register because they pin every region "
                    + "for writing: there, register files with RdmaTransport.registerFile, which maps them shared and writable");
        }
        return new RegistrationException(what);
    }

    // ---- listen / connect ----

    @Override
    public ProviderListener listen(InetSocketAddress address, Consumer<ProviderConnection> onConnection) {
        checkOpen();
        MemorySegment id = createId();
        try {
            RdmaCm.bind(id, address);
            RdmaCm.listen(id, LISTEN_BACKLOG);
        } catch (RuntimeException e) {
            RdmaCm.destroyId(id);
            throw asRdmaException(e);
        }
        VerbsListener l = new VerbsListener(this, id, new InetSocketAddress(address.getAddress(), RdmaCm.sourcePort(id)),
                onConnection);
        listeners.add(l);
        cmEvents.on(id, l::onConnectRequest);
        return l;
    }

    @Override
    public ProviderConnection connect(InetSocketAddress address, Duration timeout) {
        checkOpen();
        long deadline = System.nanoTime() + timeout.toNanos();
        int timeoutMs = (int) Math.max(1, Math.min(Integer.MAX_VALUE, timeout.toMillis()));
        for (int attempt = 1; ; attempt++) {
            try {
                return connectOnce(address, deadline, timeoutMs);
            } catch (PortInUse e) {
                // iWARP connects over a kernel TCP socket bound to the CM id's port, which a connection that ended
                // moments ago may still hold (TIME_WAIT): a new CM id gets a new port
                if (attempt == MAX_CONNECT_ATTEMPTS || System.nanoTime() >= deadline) {
                    throw new RdmaException("connect to " + address + " failed: " + e.getCause().getMessage()
                            + " on " + attempt + " local ports in a row", e.getCause());
                }
                LOG.log(System.Logger.Level.DEBUG, () -> "connect to " + address + ": local port in use, retrying");
                checkOpen();
            }
        }
    }

    /** The local port rdma_connect was to use is taken; the attempt's resources are gone. */
    private static final class PortInUse extends RuntimeException {
        private static final long serialVersionUID = 1L;

        PortInUse(NativeCallException cause) {
            super(cause.getMessage(), cause, false, false);
        }
    }

    private ProviderConnection connectOnce(InetSocketAddress address, long deadline, int timeoutMs) {
        MemorySegment id = createId();
        VerbsConnection c = new VerbsConnection(this, id, true);
        BlockingQueue<RdmaCm.Event> events = new LinkedBlockingQueue<>();
        c.setupEvents(events);
        settingUp.add(c);
        cmEvents.on(id, c::onCmEvent);
        try {
            RdmaCm.resolveAddress(id, new InetSocketAddress(localAddress, 0), address, timeoutMs);
            expect(events, RdmaCm.ADDR_RESOLVED, deadline, address);
            RdmaCm.resolveRoute(id, timeoutMs);
            expect(events, RdmaCm.ROUTE_RESOLVED, deadline, address);
            c.createResources();
            RdmaCm.connect(id, c.connectionParameters(device.readDepth, device.readDepth));
            RdmaCm.Event established = expect(events, RdmaCm.ESTABLISHED, deadline, address);
            c.established(established.privateData());
            settingUp.remove(c);
            progress.attach(c);
        } catch (RuntimeException e) {
            settingUp.remove(c);
            c.destroyUnattached();
            if (e instanceof NativeCallException n && n.errno() == Errno.EADDRINUSE) {
                throw new PortInUse(n);
            }
            RuntimeException r = asRdmaException(e);
            if (r instanceof RdmaException) {
                throw r;
            }
            throw new RdmaException("connect to " + address + " failed: " + e.getMessage(), e);
        }
        c.authenticate(deadline); // attached: on failure it closes through the progress thread
        return c;
    }

    private MemorySegment createId() {
        try {
            return RdmaCm.createId(device.eventChannel);
        } catch (NativeCallException e) {
            throw asRdmaException(e);
        }
    }

    private static RuntimeException asRdmaException(RuntimeException e) {
        return e instanceof NativeCallException n ? new RdmaException(n.getMessage(), n) : e;
    }

    private static RdmaCm.Event expect(BlockingQueue<RdmaCm.Event> events, int type, long deadline, InetSocketAddress peer) {
        RdmaCm.Event e;
        try {
            e = events.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new RdmaException("interrupted while connecting to " + peer, ex);
        }
        if (e == null) {
            throw new RdmaTimeoutException("connect to " + peer + " timed out waiting for " + RdmaCm.eventName(type));
        }
        if (e.type() != type) {
            throw new ConnectionClosedException("connect to " + peer + " failed: " + e.describe() + " instead of "
                    + RdmaCm.eventName(type)
                    + (e.type() == RdmaCm.REJECTED ? " (nobody listening there, or the peer refused)" : ""));
        }
        return e;
    }

    // ---- bookkeeping for connections and listeners ----

    /**
     * Counts and logs a refused peer (one that failed authentication; {@link TransportMetrics#recordRejected}).
     * The message names the peer and the reason, never the secret.
     */
    void rejected(String what) {
        metrics.recordRejected(LOG, () -> "rdma4j verbs rejected: " + what);
    }

    void settingUp(VerbsConnection c) {
        settingUp.add(c);
    }

    void settingUpEnded(VerbsConnection c) {
        settingUp.remove(c);
    }

    void detach(VerbsConnection c) {
        progress.detach(c);
    }

    void listenerClosed(VerbsListener l) {
        listeners.remove(l);
    }

    boolean isOpen() {
        return running;
    }

    @Override
    public long maxOperationLength() {
        return device.maxOperationLength;
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new ConnectionClosedException("verbs transport is closed");
        }
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        for (VerbsListener l : listeners) {
            l.close();
        }
        List<VerbsConnection> attached = progress.attached();
        for (VerbsConnection c : attached) {
            c.close();
        }
        running = false;
        cmEvents.close();
        // The progress thread tears down every connection (past the grace period whatever they wait for) before
        // the device goes: freeing the device first would free what it may still poll.
        boolean progressEnded = progress.stop(CLOSE_GRACE);
        for (VerbsConnection c : settingUp) {
            c.destroyUnattached();
        }
        if (!progressEnded || cmEvents.isAlive()) {
            LOG.log(System.Logger.Level.ERROR, "the rdma4j verbs " + (progressEnded ? "CM event" : "progress")
                    + " thread did not end within " + CLOSE_GRACE + " and a few seconds: the device (protection domain,"
                    + " channels) is left allocated, since that thread may still use it");
            return;
        }
        // no queue pair is left on the SRQ or the receive CQ, nothing is posted from the staging slots
        deviceEvents.close();
        receiveCompletions.close();
        receives.close();
        staging.close();
        device.close();
    }

    static void join(Thread t) {
        try {
            t.join(TimeUnit.SECONDS.toMillis(10));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
