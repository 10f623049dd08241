package io.rdma4j.core.internal;

import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ConnectionEvents;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * Plain two-sided messages of one connection that the application has not received yet, and the receivers
 * waiting for one. Guarded by the connection's close lock, so no receiver starts waiting after the close has
 * failed the waiting ones.
 */
final class MessageInbox {

    /** A peer may queue this many unreceived messages; more means it ignores flow control. */
    static final int MAX_UNRECEIVED_MESSAGES = 4096;

    private final Object closeLock;
    /** Under the close lock: null while the connection is open, else the exception for receivers. */
    private final Supplier<RdmaException> closedFailure;
    private final Executor completions;
    /** The queued bytes of every connection of the transport, for the provider's budget; this inbox's part until closed. */
    private final AtomicLong transportQueued;
    /** Under the close lock: the connection closed, and what is left here no longer counts for the transport. */
    private boolean detached;
    private final ArrayDeque<ByteBuffer> messages = new ArrayDeque<>();
    private final ArrayDeque<Waiter> waiters = new ArrayDeque<>();
    /** What the queued messages count towards the provider's inbox bound. */
    private volatile long queuedBytes;
    /** Told when a queued message was taken: a provider holding its reader back at the inbox bound reads on. */
    private final Runnable taken;

    MessageInbox(Object closeLock, Supplier<RdmaException> closedFailure, Executor completions, AtomicLong transportQueued,
                 Runnable taken) {
        this.closeLock = closeLock;
        this.closedFailure = closedFailure;
        this.completions = completions;
        this.transportQueued = transportQueued;
        this.taken = taken;
    }

    CompletableFuture<ByteBuffer> receive() {
        return receive(null);
    }

    /** {@code executor}: where the future is completed when a message arrives later; null for the completion threads. */
    CompletableFuture<ByteBuffer> receive(Executor executor) {
        ByteBuffer next;
        synchronized (closeLock) {
            next = messages.pollFirst();
            if (next == null) {
                RdmaException closed = closedFailure.get();
                if (closed != null) {
                    return CompletableFuture.failedFuture(closed);
                }
                CompletableFuture<ByteBuffer> waiter = new CompletableFuture<>();
                waiters.addLast(new Waiter(waiter, executor));
                return waiter;
            }
            queuedBytes -= cost(next);
            if (!detached) {
                transportQueued.addAndGet(-cost(next));
            }
        }
        taken.run();
        return CompletableFuture.completedFuture(next);
    }

    /**
     * Hands {@code message} to the oldest waiting receiver, on a completion thread, or queues it; false when
     * {@value #MAX_UNRECEIVED_MESSAGES} messages are queued already, and the caller must close the connection.
     * {@code lent}: the application's own buffer, handed over as itself; rdma4j's own go out read-only.
     */
    boolean offer(ByteBuffer message, boolean lent) {
        Waiter waiter;
        synchronized (closeLock) {
            waiter = waiters.pollFirst();
            if (waiter == null) {
                if (messages.size() >= MAX_UNRECEIVED_MESSAGES) {
                    return false;
                }
                messages.addLast(lent ? message : message.asReadOnlyBuffer());
                queuedBytes += cost(message);
                if (!detached) {
                    transportQueued.addAndGet(cost(message));
                }
                return true;
            }
        }
        ByteBuffer m = lent ? message : message.asReadOnlyBuffer();
        waiter.run(() -> waiter.future.complete(m), completions);
        return true;
    }

    /** Bytes of queued messages, each counted at least {@link ConnectionEvents#MESSAGE_OVERHEAD}. */
    long queuedBytes() {
        return queuedBytes;
    }

    private static long cost(ByteBuffer message) {
        return Math.max(message.remaining(), ConnectionEvents.MESSAGE_OVERHEAD);
    }

    /**
     * Under the close lock, once the connection is closed: the receivers to fail. Messages still queued stay
     * receivable, but no longer count towards the transport's total, which bounds what live peers may still send.
     */
    List<Waiter> takeWaiters() {
        if (!detached) {
            detached = true;
            transportQueued.addAndGet(-queuedBytes);
        }
        List<Waiter> taken = new ArrayList<>(waiters);
        waiters.clear();
        return taken;
    }

    void fail(List<Waiter> receivers, RdmaException failure) {
        for (Waiter w : receivers) {
            w.run(() -> w.future.completeExceptionally(failure), completions);
        }
    }

    /** A receiver and where its future is completed: its own executor, else (or if that refuses) the completion threads. */
    record Waiter(CompletableFuture<ByteBuffer> future, Executor executor) {
        void run(Runnable completion, Executor completions) {
            if (executor != null) {
                try {
                    executor.execute(completion);
                    return;
                } catch (java.util.concurrent.RejectedExecutionException e) {
                    // the application's executor is shutting down: complete as any receive
                }
            }
            completions.execute(completion);
        }
    }
}
