package io.rdma4j.core.metrics;

import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * Counters of one transport: operations started here (count, bytes, errors, latency, in flight), what
 * this side served to peers as a responder, rejections, registrations and connections. Lock-free;
 * bind to Micrometer with {@link MicrometerMetrics}, or read {@link #snapshot(OperationType)}.
 */
public final class TransportMetrics {

    private static final long REJECTION_WARNING_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final String provider;
    private final Map<OperationType, Counters> initiated = new EnumMap<>(OperationType.class);
    private final Map<OperationType, LongAdder> servedBytes = new EnumMap<>(OperationType.class);
    private final Map<OperationType, LongAdder> servedOperations = new EnumMap<>(OperationType.class);
    private final LongAdder rejectedRequests = new LongAdder();
    private final AtomicLong lastRejectionWarning = new AtomicLong(System.nanoTime() - REJECTION_WARNING_INTERVAL_NANOS);
    private final AtomicLong rejectionsSinceWarning = new AtomicLong();
    private final AtomicLong inFlight = new AtomicLong();
    private final AtomicLong registeredRegions = new AtomicLong();
    private final AtomicLong registeredBytes = new AtomicLong();
    private final AtomicLong openConnections = new AtomicLong();
    private final LongAdder displacedHandshakes = new LongAdder();
    private volatile LongSupplier bufferedBytes = () -> 0;
    private volatile LongSupplier lentReceiveCredits = () -> 0;
    private final AtomicLong messageBufferBytes = new AtomicLong();
    private final List<OperationListener> listeners = new CopyOnWriteArrayList<>();

    public TransportMetrics(String provider) {
        this.provider = provider;
        for (OperationType t : OperationType.values()) {
            initiated.put(t, new Counters());
            servedBytes.put(t, new LongAdder());
            servedOperations.put(t, new LongAdder());
        }
    }

    public String provider() {
        return provider;
    }

    /** Adds a listener for finished operations (latency timers). */
    public void addListener(OperationListener listener) {
        listeners.add(listener);
    }

    public void removeListener(OperationListener listener) {
        listeners.remove(listener);
    }

    // ---- recording, called by the transport and providers ----

    public void operationStarted() {
        inFlight.incrementAndGet();
    }

    public void operationFinished(OperationType type, long bytes, long nanos, boolean success) {
        inFlight.decrementAndGet();
        recordCompleted(type, bytes, nanos, success);
    }

    /** An operation that was never in flight (a received message). */
    public void recordCompleted(OperationType type, long bytes, long nanos, boolean success) {
        Counters c = initiated.get(type);
        c.count.increment();
        if (success) {
            c.bytes.add(bytes);
            c.nanos.add(nanos);
        } else {
            c.errors.increment();
        }
        for (OperationListener l : listeners) {
            l.onOperation(type, bytes, nanos, success);
        }
    }

    /** This side, as a responder, served a peer's read or write of {@code bytes}. */
    public void recordServed(OperationType type, long bytes) {
        servedOperations.get(type).increment();
        servedBytes.get(type).add(bytes);
    }

    /**
     * This side refused a peer or its request (bad key, range, rights, malformed frame, failed handshake): counts
     * it and logs {@code what} to {@code log}. At WARNING at most once a second per transport, so that a hostile
     * peer cannot flood the log, each such warning naming how many rejections went to DEBUG since the last one.
     */
    public void recordRejected(System.Logger log, Supplier<String> what) {
        rejectedRequests.increment();
        long now = System.nanoTime();
        long last = lastRejectionWarning.get();
        if (now - last >= REJECTION_WARNING_INTERVAL_NANOS && lastRejectionWarning.compareAndSet(last, now)) {
            long quiet = rejectionsSinceWarning.getAndSet(0);
            log.log(System.Logger.Level.WARNING, what.get() + (quiet == 0 ? ""
                    : " (" + quiet + " more rejection(s) since the last warning, logged at DEBUG)"));
        } else {
            rejectionsSinceWarning.incrementAndGet();
            log.log(System.Logger.Level.DEBUG, what);
        }
    }

    public void regionRegistered(long bytes) {
        registeredRegions.incrementAndGet();
        registeredBytes.addAndGet(bytes);
    }

    public void regionDeregistered(long bytes) {
        registeredRegions.decrementAndGet();
        registeredBytes.addAndGet(-bytes);
    }

    /** The provider registered {@code bytes} for its own message buffers (verbs receive and send slots). */
    public void messageBuffersRegistered(long bytes) {
        messageBufferBytes.addAndGet(bytes);
    }

    public void messageBuffersDeregistered(long bytes) {
        messageBufferBytes.addAndGet(-bytes);
    }

    public void connectionOpened() {
        openConnections.incrementAndGet();
    }

    public void connectionClosed() {
        openConnections.decrementAndGet();
    }

    /** A socket still in its handshake was closed to admit a newer one (the listener's half-open budget was full). */
    public void handshakeDisplaced() {
        displacedHandshakes.increment();
    }

    /** Where {@link #bufferedBytes()} comes from; the transport sets it once it is open. */
    public void bufferedBytesFrom(LongSupplier source) {
        this.bufferedBytes = source;
    }

    /** Where {@link #lentReceiveCredits()} comes from; the verbs provider sets it once its transport is open. */
    public void lentReceiveCreditsFrom(LongSupplier source) {
        this.lentReceiveCredits = source;
    }

    // ---- reading ----

    public Snapshot snapshot(OperationType type) {
        Counters c = initiated.get(type);
        return new Snapshot(type, c.count.sum(), c.errors.sum(), c.bytes.sum(), c.nanos.sum());
    }

    public long inFlight() {
        return inFlight.get();
    }

    public long servedBytes(OperationType type) {
        return servedBytes.get(type).sum();
    }

    public long servedOperations(OperationType type) {
        return servedOperations.get(type).sum();
    }

    public long rejectedRequests() {
        return rejectedRequests.sum();
    }

    public long registeredRegions() {
        return registeredRegions.get();
    }

    public long registeredBytes() {
        return registeredBytes.get();
    }

    public long openConnections() {
        return openConnections.get();
    }

    /**
     * Bytes the provider registered for its own two-sided message buffers, apart from {@link #registeredBytes()}
     * (the application's regions and buffer pools); 0 on tcp, which registers nothing. Registered memory is locked:
     * {@code RLIMIT_MEMLOCK} must hold both.
     */
    public long messageBufferBytes() {
        return messageBufferBytes.get();
    }

    public long displacedHandshakes() {
        return displacedHandshakes.sum();
    }

    /**
     * Bytes held for peers: their messages the application has not received, and responses to their requests not
     * yet written, over all connections. The tcp provider bounds them with {@code tcp.max-buffered-bytes}.
     */
    public long bufferedBytes() {
        return bufferedBytes.getAsLong();
    }

    /**
     * Verbs: receive credits lent from the transport's shared pool to peers with more to send, over all connections;
     * each is a posted receive slot. They come back as the peers use them, and from a peer that stopped sending within
     * about two seconds. 0 on tcp.
     */
    public long lentReceiveCredits() {
        return lentReceiveCredits.getAsLong();
    }

    /** Totals of one operation type; {@code totalNanos} covers successful operations. */
    public record Snapshot(OperationType type, long count, long errors, long bytes, long totalNanos) {
        public long successes() {
            return count - errors;
        }
    }

    private static final class Counters {
        final LongAdder count = new LongAdder();
        final LongAdder errors = new LongAdder();
        final LongAdder bytes = new LongAdder();
        final LongAdder nanos = new LongAdder();
    }
}
