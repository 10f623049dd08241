package io.rdma4j.core.metrics;

import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counters of one transport: operations started here (count, bytes, errors, latency, in flight), what
 * this side served to peers as a responder, rejections, registrations and connections. Lock-free;
 * bind to Micrometer with {@link MicrometerMetrics}, or read {@link #snapshot(OperationType)}.
 */
public final class TransportMetrics {

    private final String provider;
    private final Map<OperationType, Counters> initiated = new EnumMap<>(OperationType.class);
    private final Map<OperationType, LongAdder> servedBytes = new EnumMap<>(OperationType.class);
    private final Map<OperationType, LongAdder> servedOperations = new EnumMap<>(OperationType.class);
    private final LongAdder rejectedRequests = new LongAdder();
    private final AtomicLong inFlight = new AtomicLong();
    private final AtomicLong registeredRegions = new AtomicLong();
    private final AtomicLong registeredBytes = new AtomicLong();
    private final AtomicLong openConnections = new AtomicLong();
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

    /** This side, as a responder, refused a peer's request (bad key, range, rights, malformed frame). */
    public void recordRejected() {
        rejectedRequests.increment();
    }

    public void regionRegistered(long bytes) {
        registeredRegions.incrementAndGet();
        registeredBytes.addAndGet(bytes);
    }

    public void regionDeregistered(long bytes) {
        registeredRegions.decrementAndGet();
        registeredBytes.addAndGet(-bytes);
    }

    public void connectionOpened() {
        openConnections.incrementAndGet();
    }

    public void connectionClosed() {
        openConnections.decrementAndGet();
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
