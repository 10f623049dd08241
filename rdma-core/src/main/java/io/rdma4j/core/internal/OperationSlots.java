package io.rdma4j.core.internal;

import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.metrics.TransportMetrics;

import java.time.Duration;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * Back-pressure of one connection: each operation, and each request until its reply, holds one of
 * max-outstanding-operations slots; a caller waits up to the operation timeout for a free one.
 */
final class OperationSlots {

    private final Semaphore permits;
    private final AtomicInteger outstanding = new AtomicInteger();
    private final int limit;
    private final Duration timeout;
    private final long timeoutNanos;
    private final TransportMetrics metrics;
    /** Null while the connection is open, else the exception for operations. */
    private final Supplier<RdmaException> closedFailure;
    /** Named in the timeout message. */
    private final Object connection;
    /**
     * Runs before a caller waits: writes the sends held back for more ({@code flushSends}), which hold slots that
     * only their writing frees, so a sender never waits on itself.
     */
    private final Runnable beforeWaiting;

    OperationSlots(int limit, Duration timeout, TransportMetrics metrics, Supplier<RdmaException> closedFailure,
                   Object connection, Runnable beforeWaiting) {
        this.permits = new Semaphore(limit);
        this.limit = limit;
        this.timeout = timeout;
        this.timeoutNanos = timeout.toNanos();
        this.metrics = metrics;
        this.closedFailure = closedFailure;
        this.connection = connection;
        this.beforeWaiting = beforeWaiting;
    }

    /** Waits for a permit; fails if none frees within the timeout, or if the connection closed meanwhile. */
    void acquire() {
        boolean acquired;
        try {
            acquired = permits.tryAcquire();
            if (!acquired) {
                beforeWaiting.run();
                acquired = permits.tryAcquire(timeoutNanos, TimeUnit.NANOSECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RdmaException("interrupted while waiting for an operation slot", e);
        }
        if (!acquired) {
            throw new RdmaTimeoutException("no operation slot freed within " + timeout + " ("
                    + limit + " operations outstanding on " + connection + ")");
        }
        RdmaException closed = closedFailure.get();
        if (closed != null) {
            permits.release();
            throw closed;
        }
    }

    /** Gives back a permit whose operation never started. */
    void cancel() {
        permits.release();
    }

    /** Counts the operation that holds a permit as outstanding. */
    void occupy() {
        outstanding.incrementAndGet();
        metrics.operationStarted();
    }

    /** Gives an outstanding operation's slot back. */
    void free() {
        // Decrement before releasing the permit, so outstanding() never exceeds the limit.
        outstanding.decrementAndGet();
        permits.release();
    }

    int outstanding() {
        return outstanding.get();
    }
}
