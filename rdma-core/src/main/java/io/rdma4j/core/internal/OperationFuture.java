package io.rdma4j.core.internal;

import io.rdma4j.core.spi.ProviderConnection;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * The future the application gets for an operation. The provider's I/O thread only records the outcome
 * ({@link #settle}) and never completes the future, so no callback runs there. If the application already waits
 * in {@code get} or {@code join}, the I/O thread wakes that caller, which completes the future on its own thread;
 * otherwise a completion thread completes it. The waiting caller first checks for the outcome briefly when the
 * operation is small ({@link ProviderConnection#spinWait}): then nobody needs waking at all. Either way the
 * outcome reaches a waiting caller with at most one thread wake-up instead of two.
 */
final class OperationFuture<T> extends CompletableFuture<T> {

    private final ProviderConnection pc;
    private final Executor completions;
    private final boolean spin;
    /** The one caller waiting to complete the future itself; others wait on the future as usual. */
    private final AtomicReference<Thread> waiter = new AtomicReference<>();
    private volatile boolean settled;
    private T value;
    private Throwable failure;

    /** {@code spin}: whether the operation is small enough to be over sooner than a sleeping caller is woken. */
    OperationFuture(ProviderConnection pc, Executor completions, boolean spin) {
        this.pc = pc;
        this.completions = completions;
        this.spin = spin;
    }

    /** Records the outcome, on any thread; never runs a callback itself. */
    void settle(T value, Throwable failure) {
        this.value = value;
        this.failure = failure;
        settled = true;
        Thread w = waiter.get();
        if (w != null) {
            // it sees `settled` at the latest when it stops waiting, and completes the future
            LockSupport.unpark(w);
        } else {
            completions.execute(this::completeWithOutcome);
        }
    }

    private void completeWithOutcome() {
        if (failure == null) {
            complete(value);
        } else {
            completeExceptionally(failure);
        }
    }

    /**
     * Waits for the outcome until {@code deadlineNanos} (or an interrupt) and completes the future with it on
     * this thread; returns without waiting when another caller already does so.
     */
    private void awaitOutcome(long deadlineNanos) {
        if (isDone() || !waiter.compareAndSet(null, Thread.currentThread())) {
            return;
        }
        try {
            if (spin) {
                pc.spinWait(() -> settled);
            }
            while (!settled && !Thread.currentThread().isInterrupted()) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                LockSupport.parkNanos(this, left);
            }
        } finally {
            waiter.set(null);
        }
        if (settled) {
            completeWithOutcome();
        }
    }

    @Override
    public T get() throws InterruptedException, ExecutionException {
        awaitOutcome(System.nanoTime() + Long.MAX_VALUE / 2);
        return super.get();
    }

    @Override
    public T get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        awaitOutcome(deadline);
        return super.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    }

    @Override
    public T join() {
        awaitOutcome(System.nanoTime() + Long.MAX_VALUE / 2);
        return super.join();
    }
}
