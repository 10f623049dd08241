package io.rdma4j.core.verbs;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RegistrationException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderListener;
import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.core.spi.ProviderTransport;
import io.rdma4j.nativeloader.Errno;
import io.rdma4j.nativeloader.MemlockLimit;
import io.rdma4j.nativeloader.Poll;
import io.rdma4j.nativeloader.RdmaCmOps;
import io.rdma4j.nativeloader.bindings.RdmaBindings;
import io.rdma4j.nativeloader.bindings.ibv_comp_channel;
import io.rdma4j.nativeloader.bindings.ibv_context;
import io.rdma4j.nativeloader.bindings.ibv_device_attr;
import io.rdma4j.nativeloader.bindings.ibv_mr;
import io.rdma4j.nativeloader.bindings.ibv_port_attr;
import io.rdma4j.nativeloader.bindings.rdma_cm_event;
import io.rdma4j.nativeloader.bindings.rdma_cm_id;
import io.rdma4j.nativeloader.bindings.rdma_conn_param;
import io.rdma4j.nativeloader.bindings.rdma_event_channel;
import io.rdma4j.nativeloader.bindings.sockaddr_in;
import io.rdma4j.nativeloader.discovery.RdmaTransport;
import io.rdma4j.nativeloader.discovery.SelectionResult;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * An opened verbs provider: one rdma_cm event channel (and its thread), the device context that
 * librdmacm uses for this transport's address, one protection domain, one completion channel whose CQs
 * (one per connection) a progress thread polls, arming them and sleeping on the channel when idle.
 * With {@code verbs.busy-poll=true} the progress thread never sleeps: it spins on the CQs as perftest
 * does, trading one CPU core (busy even when idle) for the wake-up latency of the completion channel.
 */
final class VerbsTransport implements ProviderTransport {

    private static final System.Logger LOG = System.getLogger(VerbsTransport.class.getName());
    static final long MAX_OPERATION_LENGTH_CAP = 1L << 30;
    private static final int POLL_TIMEOUT_MS = 50;
    private static final long SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
    /**
     * A CQ whose caller polled it this recently is left to callers: the progress thread neither arms it nor polls it
     * more often than every CALLER_RECENT_SLEEP_MS, and sleeps at most that long.
     */
    private static final long CALLER_RECENT_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final int CALLER_RECENT_SLEEP_MS = 2;
    private static final long CALLER_RECENT_SLEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(CALLER_RECENT_SLEEP_MS);

    final TransportConfig config;
    final TransportMetrics metrics;
    final SelectionResult.Selection selection;
    final boolean iwarp;
    /** {@code verbs.busy-poll}: the progress thread spins instead of arming the CQs and sleeping. */
    private final boolean busyPoll;
    /** {@code verbs.await-spin-micros}: how long a caller waiting on an operation polls the CQ itself. */
    final long awaitSpinNanos;
    final InetAddress localAddress;
    final int receiveDepth;
    private final Arena arena = Arena.ofShared();
    final MemorySegment eventChannel;
    private final MemorySegment anchorId;
    final MemorySegment context;
    final MemorySegment pd;
    final MemorySegment compChannel;
    private final long maxOperationLength;
    final int readDepth;
    private final Map<Long, Consumer<CmEvent>> cmHandlers = new ConcurrentHashMap<>();
    /** Connections the progress thread polls (established ones). */
    private final List<VerbsConnection> attached = new CopyOnWriteArrayList<>();
    /** Connections being set up (not yet polled). */
    private final Set<VerbsConnection> settingUp = ConcurrentHashMap.newKeySet();
    private final Set<Listener> listeners = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean closed = new AtomicBoolean();
    private volatile boolean running = true;
    private final Thread cmThread;
    private final Thread progressThread;

    private VerbsTransport(TransportConfig config, TransportMetrics metrics, SelectionResult.Selection selection,
                           InetAddress localAddress) {
        this.config = config;
        this.metrics = metrics;
        this.selection = selection;
        this.iwarp = selection.transport() == RdmaTransport.IWARP;
        this.localAddress = localAddress;
        this.receiveDepth = config.option(VerbsProvider.NAME, "receive-depth").map(Integer::parseInt).orElse(32);
        this.busyPoll = config.option(VerbsProvider.NAME, "busy-poll").map(VerbsTransport::parseBoolean).orElse(false);
        long awaitSpinMicros = config.option(VerbsProvider.NAME, "await-spin-micros").map(Long::parseLong).orElse(1000L);
        if (awaitSpinMicros < 0 || awaitSpinMicros > 1_000_000) {
            throw new IllegalArgumentException("verbs.await-spin-micros must be in [0, 1000000], got " + awaitSpinMicros);
        }
        this.awaitSpinNanos = TimeUnit.MICROSECONDS.toNanos(awaitSpinMicros);
        if (receiveDepth < 2 || receiveDepth > 4096) {
            throw new IllegalArgumentException("verbs.receive-depth must be in [2, 4096], got " + receiveDepth);
        }
        List<Runnable> undo = new ArrayList<>();
        try {
            eventChannel = NativeCalls.requirePointer("rdma_create_event_channel", NativeCalls.CREATE_EVENT_CHANNEL)
                    .reinterpret(rdma_event_channel.sizeof());
            undo.add(() -> RdmaBindings.rdma_destroy_event_channel(eventChannel));
            anchorId = createId();
            undo.add(() -> RdmaBindings.rdma_destroy_id(anchorId));
            // Binding to the device's address makes librdmacm attach the id to that device: its context is
            // the one every cm id of this transport will use.
            try (Arena a = Arena.ofConfined()) {
                NativeCalls.check("rdma_bind_addr(" + localAddress.getHostAddress() + ")", NativeCalls.BIND_ADDR, anchorId,
                        sockaddr(a, new InetSocketAddress(localAddress, 0)));
            }
            MemorySegment ctx = rdma_cm_id.verbs(anchorId);
            if (ctx.equals(MemorySegment.NULL)) {
                throw new ProviderUnavailableException("address " + localAddress.getHostAddress()
                        + " is not on an RDMA device: set the rdma4j 'address' option to the IP of "
                        + selection.device().name() + "'s net device");
            }
            context = ctx.reinterpret(ibv_context.sizeof());
            String deviceName = RdmaBindings.ibv_get_device_name(ibv_context.device(context))
                    .reinterpret(RdmaBindings.IBV_SYSFS_NAME_MAX()).getString(0);
            if (!deviceName.equals(selection.device().name())) {
                throw new ProviderUnavailableException("address " + localAddress.getHostAddress() + " belongs to RDMA device "
                        + deviceName + ", not to the selected " + selection.device().name()
                        + ": set the rdma4j 'device' and 'address' options consistently");
            }
            pd = NativeCalls.requirePointer("ibv_alloc_pd", NativeCalls.ALLOC_PD, context);
            undo.add(() -> RdmaBindings.ibv_dealloc_pd(pd));
            compChannel = NativeCalls.requirePointer("ibv_create_comp_channel", NativeCalls.CREATE_COMP_CHANNEL, context)
                    .reinterpret(ibv_comp_channel.sizeof());
            undo.add(() -> RdmaBindings.ibv_destroy_comp_channel(compChannel));
            MemorySegment port = ibv_port_attr.allocate(arena);
            int rc = RdmaBindings.ibv_query_port(context, (byte) selection.port().number(), port);
            if (rc != 0) {
                throw new RdmaException("ibv_query_port failed: " + rc);
            }
            long maxMsg = Integer.toUnsignedLong(ibv_port_attr.max_msg_sz(port));
            maxOperationLength = Math.min(maxMsg == 0 ? MAX_OPERATION_LENGTH_CAP : maxMsg, MAX_OPERATION_LENGTH_CAP);
            MemorySegment dev = ibv_device_attr.allocate(arena);
            rc = RdmaBindings.ibv_query_device(context, dev);
            if (rc != 0) {
                throw new RdmaException("ibv_query_device failed: " + rc);
            }
            readDepth = Math.max(1, Math.min(128, Math.min(ibv_device_attr.max_qp_rd_atom(dev),
                    ibv_device_attr.max_qp_init_rd_atom(dev))));
        } catch (RuntimeException e) {
            for (int i = undo.size() - 1; i >= 0; i--) {
                undo.get(i).run();
            }
            arena.close();
            throw e;
        }
        cmThread = Thread.ofPlatform().daemon().name("rdma4j-verbs-cm").start(this::cmLoop);
        progressThread = Thread.ofPlatform().daemon().name("rdma4j-verbs-progress").start(this::progressLoop);
    }

    static VerbsTransport open(TransportConfig config, TransportMetrics metrics, SelectionResult.Selection selection) {
        InetAddress local = localAddress(config, selection);
        try {
            return new VerbsTransport(config, metrics, selection, local);
        } catch (RdmaException e) {
            if (e instanceof ProviderUnavailableException) {
                throw e;
            }
            throw new ProviderUnavailableException("verbs provider cannot open " + selection.device().name() + ": "
                    + e.getMessage(), e);
        }
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
        int flags = VerbsAccess.flags(access, iwarp);
        int[] errno = new int[1];
        MemorySegment mr = NativeCalls.callPointer(NativeCalls.REG_MR, errno, pd, MemorySegment.ofAddress(segment.address()),
                segment.byteSize(), flags);
        if (mr.equals(MemorySegment.NULL)) {
            throw registrationFailure(segment.byteSize(), errno[0]);
        }
        mr = mr.reinterpret(ibv_mr.sizeof());
        return new VerbsRegion(mr, ibv_mr.lkey(mr), ibv_mr.rkey(mr));
    }

    static RegistrationException registrationFailure(long bytes, int errno) {
        String what = "ibv_reg_mr of " + bytes + " bytes failed: " + Errno.name(errno);
        if (errno == Errno.ENOMEM || errno == Errno.EPERM || errno == 11 /* EAGAIN */) {
            String limit = MemlockLimit.current().map(MemlockLimit::toString).orElse("memlock limit unknown");
            return new RegistrationException(what + ": registered memory is pinned and counts against RLIMIT_MEMLOCK ("
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

    /** A memory region: its rkey is the descriptor key. */
    static final class VerbsRegion implements ProviderRegion {
        private final MemorySegment mr;
        private final int lkey;
        private final int rkey;
        private final AtomicBoolean closed = new AtomicBoolean();

        VerbsRegion(MemorySegment mr, int lkey, int rkey) {
            this.mr = mr;
            this.lkey = lkey;
            this.rkey = rkey;
        }

        @Override
        public long key() {
            return Integer.toUnsignedLong(rkey);
        }

        @Override
        public long localKey() {
            return Integer.toUnsignedLong(lkey);
        }

        int lkey() {
            return lkey;
        }

        @Override
        public void close() {
            if (closed.compareAndSet(false, true)) {
                int rc = RdmaBindings.ibv_dereg_mr(mr);
                if (rc != 0) {
                    LOG.log(System.Logger.Level.WARNING, "ibv_dereg_mr failed: " + rc);
                }
            }
        }
    }

    // ---- rdma_cm ----

    /** What the CM thread copies out of an rdma_cm_event before acknowledging it. */
    record CmEvent(long id, long listenId, int type, int status, byte[] privateData, int initiatorDepth,
                   int responderResources) {
        String describe() {
            return NativeCalls.cmEvent(type) + (status != 0 ? " (status " + status + ")" : "");
        }
    }

    MemorySegment createId() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ValueLayout.ADDRESS);
            NativeCalls.check("rdma_create_id", NativeCalls.CREATE_ID, eventChannel, out, MemorySegment.NULL,
                    RdmaBindings.RDMA_PS_TCP());
            return out.get(ValueLayout.ADDRESS, 0).reinterpret(rdma_cm_id.sizeof());
        }
    }

    void onCmEvents(MemorySegment id, Consumer<CmEvent> handler) {
        cmHandlers.put(id.address(), handler);
    }

    void forgetCmEvents(MemorySegment id) {
        cmHandlers.remove(id.address());
    }

    static MemorySegment sockaddr(Arena a, InetSocketAddress address) {
        if (!(address.getAddress() instanceof Inet4Address v4)) {
            throw new IllegalArgumentException("the verbs provider supports IPv4 addresses only, got " + address);
        }
        MemorySegment s = sockaddr_in.allocate(a);
        sockaddr_in.sin_family(s, (short) RdmaBindings.AF_INET());
        sockaddr_in.sin_port(s, Short.reverseBytes((short) address.getPort()));
        s.asSlice(sockaddr_in.sin_addr$offset(), 4).copyFrom(MemorySegment.ofArray(v4.getAddress()));
        return s;
    }

    static InetSocketAddress fromSockaddr(MemorySegment s) {
        s = s.reinterpret(sockaddr_in.sizeof());
        if (sockaddr_in.sin_family(s) != RdmaBindings.AF_INET()) {
            return null;
        }
        byte[] ip = s.asSlice(sockaddr_in.sin_addr$offset(), 4).toArray(ValueLayout.JAVA_BYTE);
        int port = Short.toUnsignedInt(Short.reverseBytes(sockaddr_in.sin_port(s)));
        try {
            return new InetSocketAddress(InetAddress.getByAddress(ip), port);
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    private void cmLoop() {
        try (Arena a = Arena.ofConfined()) {
            Poll poll = Poll.forReading(rdma_event_channel.fd(eventChannel), a);
            MemorySegment out = a.allocate(ValueLayout.ADDRESS);
            while (running) {
                if (!poll.awaitReadable(POLL_TIMEOUT_MS)) {
                    continue;
                }
                if (NativeCalls.callInt(NativeCalls.GET_CM_EVENT, eventChannel, out) != 0) {
                    continue;
                }
                MemorySegment ev = out.get(ValueLayout.ADDRESS, 0).reinterpret(rdma_cm_event.sizeof());
                CmEvent e = read(ev);
                // Acknowledge first: rdma_destroy_id waits for the acknowledgement of its events.
                RdmaBindings.rdma_ack_cm_event(ev);
                dispatch(e);
            }
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.ERROR, "rdma4j verbs CM event thread failed", e);
        }
    }

    private static CmEvent read(MemorySegment ev) {
        int type = rdma_cm_event.event(ev);
        MemorySegment conn = rdma_cm_event.param.conn(rdma_cm_event.param(ev));
        byte[] pd = new byte[0];
        int len = Byte.toUnsignedInt(rdma_conn_param.private_data_len(conn));
        MemorySegment p = rdma_conn_param.private_data(conn);
        if (len > 0 && !p.equals(MemorySegment.NULL)) {
            pd = p.reinterpret(len).toArray(ValueLayout.JAVA_BYTE);
        }
        return new CmEvent(rdma_cm_event.id(ev).address(), rdma_cm_event.listen_id(ev).address(), type,
                rdma_cm_event.status(ev), pd, Byte.toUnsignedInt(rdma_conn_param.initiator_depth(conn)),
                Byte.toUnsignedInt(rdma_conn_param.responder_resources(conn)));
    }

    private void dispatch(CmEvent e) {
        long key = e.type() == RdmaBindings.RDMA_CM_EVENT_CONNECT_REQUEST() ? e.listenId() : e.id();
        Consumer<CmEvent> handler = cmHandlers.get(key);
        if (handler == null) {
            if (e.type() == RdmaBindings.RDMA_CM_EVENT_CONNECT_REQUEST()) {
                RdmaBindings.rdma_reject(MemorySegment.ofAddress(e.id()).reinterpret(rdma_cm_id.sizeof()), MemorySegment.NULL, (byte) 0);
                RdmaBindings.rdma_destroy_id(MemorySegment.ofAddress(e.id()).reinterpret(rdma_cm_id.sizeof()));
            }
            return;
        }
        try {
            handler.accept(e);
        } catch (RuntimeException ex) {
            LOG.log(System.Logger.Level.WARNING, "handling " + e.describe() + " failed", ex);
        }
    }

    // ---- listen / connect ----

    @Override
    public ProviderListener listen(InetSocketAddress address, Consumer<ProviderConnection> onConnection) {
        checkOpen();
        MemorySegment id = createId();
        try (Arena a = Arena.ofConfined()) {
            NativeCalls.check("rdma_bind_addr(" + address + ")", NativeCalls.BIND_ADDR, id, sockaddr(a, address));
            NativeCalls.check("rdma_listen", NativeCalls.LISTEN, id, 128);
        } catch (RuntimeException e) {
            RdmaBindings.rdma_destroy_id(id);
            throw e;
        }
        int port = Short.toUnsignedInt(Short.reverseBytes(RdmaBindings.rdma_get_src_port(id)));
        Listener l = new Listener(id, new InetSocketAddress(address.getAddress(), port), onConnection);
        listeners.add(l);
        onCmEvents(id, l::onConnectRequest);
        return l;
    }

    private final class Listener implements ProviderListener {
        private final MemorySegment id;
        private final InetSocketAddress local;
        private final Consumer<ProviderConnection> onConnection;
        private final AtomicBoolean closed = new AtomicBoolean();

        Listener(MemorySegment id, InetSocketAddress local, Consumer<ProviderConnection> onConnection) {
            this.id = id;
            this.local = local;
            this.onConnection = onConnection;
        }

        /** On the CM thread: set up the connection and accept; it is handed over once ESTABLISHED. */
        void onConnectRequest(CmEvent e) {
            MemorySegment newId = MemorySegment.ofAddress(e.id()).reinterpret(rdma_cm_id.sizeof());
            if (closed.get() || !running) {
                RdmaBindings.rdma_reject(newId, MemorySegment.NULL, (byte) 0);
                RdmaBindings.rdma_destroy_id(newId);
                return;
            }
            VerbsConnection c = new VerbsConnection(VerbsTransport.this, newId);
            settingUp.add(c);
            onCmEvents(newId, c::onCmEvent);
            try {
                c.accept(e, () -> {
                    settingUp.remove(c);
                    attach(c);
                    onConnection.accept(c);
                });
            } catch (RuntimeException ex) {
                LOG.log(System.Logger.Level.WARNING, "rejecting connection request: " + ex.getMessage());
                RdmaBindings.rdma_reject(newId, MemorySegment.NULL, (byte) 0);
                settingUp.remove(c);
                c.destroyUnattached();
            }
        }

        @Override
        public InetSocketAddress localAddress() {
            return local;
        }

        @Override
        public void close() {
            if (closed.compareAndSet(false, true)) {
                listeners.remove(this);
                forgetCmEvents(id);
                RdmaBindings.rdma_destroy_id(id);
            }
        }
    }

    @Override
    public ProviderConnection connect(InetSocketAddress address, Duration timeout) {
        checkOpen();
        long deadline = System.nanoTime() + timeout.toNanos();
        int timeoutMs = (int) Math.max(1, Math.min(Integer.MAX_VALUE, timeout.toMillis()));
        MemorySegment id = createId();
        VerbsConnection c = new VerbsConnection(this, id);
        BlockingQueue<CmEvent> events = new LinkedBlockingQueue<>();
        c.setupEvents(events);
        settingUp.add(c);
        onCmEvents(id, c::onCmEvent);
        try (Arena a = Arena.ofConfined()) {
            NativeCalls.check("rdma_resolve_addr(" + address + ")", NativeCalls.RESOLVE_ADDR, id,
                    sockaddr(a, new InetSocketAddress(localAddress, 0)), sockaddr(a, address), timeoutMs);
            expect(events, RdmaBindings.RDMA_CM_EVENT_ADDR_RESOLVED(), deadline, address);
            NativeCalls.check("rdma_resolve_route", NativeCalls.RESOLVE_ROUTE, id, timeoutMs);
            expect(events, RdmaBindings.RDMA_CM_EVENT_ROUTE_RESOLVED(), deadline, address);
            c.createResources();
            NativeCalls.check("rdma_connect(" + address + ")", NativeCalls.CONNECT, id, c.connParam(a, readDepth, readDepth));
            CmEvent established = expect(events, RdmaBindings.RDMA_CM_EVENT_ESTABLISHED(), deadline, address);
            c.established(established.privateData());
            settingUp.remove(c);
            attach(c);
            return c;
        } catch (RuntimeException e) {
            settingUp.remove(c);
            c.destroyUnattached();
            if (e instanceof RdmaException) {
                throw e;
            }
            throw new RdmaException("connect to " + address + " failed: " + e.getMessage(), e);
        }
    }

    private static CmEvent expect(BlockingQueue<CmEvent> events, int type, long deadline, InetSocketAddress peer) {
        CmEvent e;
        try {
            e = events.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new RdmaException("interrupted while connecting to " + peer, ex);
        }
        if (e == null) {
            throw new RdmaTimeoutException("connect to " + peer + " timed out waiting for " + NativeCalls.cmEvent(type));
        }
        if (e.type() != type) {
            throw new ConnectionClosedException("connect to " + peer + " failed: " + e.describe() + " instead of "
                    + NativeCalls.cmEvent(type)
                    + (e.type() == RdmaBindings.RDMA_CM_EVENT_REJECTED() ? " (nobody listening there, or the peer refused)" : ""));
        }
        return e;
    }

    // ---- progress ----

    private void attach(VerbsConnection c) {
        attached.add(c);
    }

    void detach(VerbsConnection c) {
        attached.remove(c);
    }

    private void progressLoop() {
        try (Arena a = Arena.ofConfined()) {
            Poll poll = Poll.forReading(ibv_comp_channel.fd(compChannel), a);
            MemorySegment cqOut = a.allocate(ValueLayout.ADDRESS);
            MemorySegment ctxOut = a.allocate(ValueLayout.ADDRESS);
            long idleSince = System.nanoTime();
            long callerCqsPolledAt = idleSince;
            while (running || !attached.isEmpty()) {
                // A CQ that a caller polls, or polled just now, is left to that caller: polling it here too would
                // hold the poll lock the caller needs, to reap the caller's own completion. It is still polled
                // here every CALLER_RECENT_SLEEP_MS, for what no caller waits for (a message, a completion of
                // an asynchronous operation).
                long now = System.nanoTime();
                boolean callerCqsTurn = now - callerCqsPolledAt >= CALLER_RECENT_SLEEP_NANOS;
                if (callerCqsTurn) {
                    callerCqsPolledAt = now;
                }
                boolean any = false;
                for (VerbsConnection c : attached) {
                    if (callerCqsTurn || !c.polledByCaller(now, CALLER_RECENT_NANOS)) {
                        any |= c.progress() > 0;
                    }
                }
                if (any) {
                    idleSince = now;
                    continue;
                }
                if (busyPoll || now - idleSince < SPIN_NANOS) {
                    Thread.onSpinWait();
                    continue;
                }
                // A caller's CQ is not armed either: an event would wake this thread for completions the caller
                // reaps itself. The sleep is then capped, so that the caller's CQs get their turn.
                boolean unarmed = false;
                for (VerbsConnection c : attached) {
                    if (c.polledByCaller(now, CALLER_RECENT_NANOS)) {
                        unarmed = true;
                    } else {
                        c.arm();
                        // a completion that arrived before arming raises no event: look once more before sleeping
                        any |= c.progress() > 0;
                    }
                }
                if (!any && poll.awaitReadable(unarmed ? CALLER_RECENT_SLEEP_MS : POLL_TIMEOUT_MS)) {
                    do {
                        if (RdmaBindings.ibv_get_cq_event(compChannel, cqOut, ctxOut) == 0) {
                            RdmaBindings.ibv_ack_cq_events(cqOut.get(ValueLayout.ADDRESS, 0), 1);
                        }
                    } while (poll.awaitReadable(0));
                }
                idleSince = System.nanoTime();
            }
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.ERROR, "rdma4j verbs progress thread failed", e);
        }
    }

    private static boolean parseBoolean(String value) {
        return switch (value.trim()) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException("verbs.busy-poll must be true or false, got '" + value + "'");
        };
    }

    @Override
    public long maxOperationLength() {
        return maxOperationLength;
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
        for (Listener l : listeners) {
            l.close();
        }
        for (VerbsConnection c : attached) {
            c.close();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!attached.isEmpty() && System.nanoTime() < deadline) {
            sleep(5);
        }
        running = false;
        join(cmThread);
        join(progressThread);
        for (VerbsConnection c : settingUp) {
            c.destroyUnattached();
        }
        if (!attached.isEmpty()) {
            LOG.log(System.Logger.Level.WARNING, attached.size() + " verbs connections did not close in time");
        }
        RdmaBindings.rdma_destroy_id(anchorId);
        RdmaBindings.ibv_destroy_comp_channel(compChannel);
        int rc = RdmaBindings.ibv_dealloc_pd(pd);
        if (rc != 0) {
            LOG.log(System.Logger.Level.WARNING, "ibv_dealloc_pd failed (" + rc + "): memory regions still registered");
        }
        RdmaBindings.rdma_destroy_event_channel(eventChannel);
        arena.close();
    }

    private static void join(Thread t) {
        try {
            t.join(TimeUnit.SECONDS.toMillis(10));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static InetSocketAddress peerOf(MemorySegment id) {
        return fromSockaddr(RdmaCmOps.peerAddress(id));
    }

    static InetSocketAddress localOf(MemorySegment id) {
        return fromSockaddr(RdmaCmOps.localAddress(id));
    }
}
