package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Completions;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntSupplier;

/**
 * Who polls one connection's CQ, and when: the progress thread, or a caller waiting on its own operation,
 * which polls for up to {@code verbs.await-spin-micros} itself (as perftest does, saving two thread
 * hand-offs) before it blocks and leaves the polling to the progress thread. Whoever polls holds the poll
 * lock, never both; the CQ is torn down under it too, so nobody polls a destroyed CQ. A waiting caller polls the
 * transport's shared receive CQ as well, when nobody else does: the reply it may be waiting for arrives there.
 */
final class CompletionPolling {

    /** What one poll found: each completion, and a failed poll. Called with the poll lock held. */
    interface Handler {
        void onCompletion(long wrId, int status, int byteLength);

        void onPollFailure(int result);
    }

    /** {@link #progress}'s answer: a caller is polling this CQ right now. */
    static final int CALLER_POLLING = -1;
    /** A waiting caller reads the clock once per this many polls of the CQ (see {@link #spinUntilDone}). */
    private static final int CLOCK_EVERY_POLLS = 16;

    private final long awaitSpinNanos;
    private final Handler handler;
    /** Polls the shared receive CQ once unless someone else is ({@link ReceiveCompletions#tryPoll}). */
    private final IntSupplier sharedReceives;
    private final ReentrantLock pollLock = new ReentrantLock();
    /** Guarded by pollLock: null until the CQ exists, and again once it is destroyed. */
    private Completions completions;
    /** Guarded by pollLock: the CQ is destroyed. */
    private boolean torn;
    /** Counts callers' waits: callers read no clock for it (see {@link #polledByCaller}). */
    private volatile int callerWaits;
    /** The progress thread's own: the {@link #callerWaits} it last saw, and when it saw it change. */
    private int callerWaitsSeen;
    private long callerSeenAt = System.nanoTime() - TimeUnit.SECONDS.toNanos(1);
    /** Callers polling this CQ in {@link #spin} right now, and those blocked after polling. */
    private final AtomicInteger spinningCallers = new AtomicInteger();
    private final AtomicInteger blockedCallers = new AtomicInteger();

    CompletionPolling(long awaitSpinNanos, Handler handler, IntSupplier sharedReceives) {
        this.awaitSpinNanos = awaitSpinNanos;
        this.handler = handler;
        this.sharedReceives = sharedReceives;
    }

    /** The CQ to poll, once created. */
    void attach(Completions completions) {
        pollLock.lock();
        try {
            if (!torn) {
                this.completions = completions;
            }
        } finally {
            pollLock.unlock();
        }
    }

    /** Runs {@code action} holding the poll lock: nobody polls the CQ meanwhile. */
    void exclusively(Runnable action) {
        pollLock.lock();
        try {
            action.run();
        } finally {
            pollLock.unlock();
        }
    }

    /** Nobody polls the CQ after this returns: it may be destroyed. */
    void tearDown() {
        pollLock.lock();
        try {
            torn = true;
            completions = null;
        } finally {
            pollLock.unlock();
        }
    }

    /** Progress thread, before sleeping: asks for an event on the next completion (skipped while a caller polls). */
    void arm() {
        if (pollLock.tryLock()) {
            try {
                if (completions != null) {
                    completions.requestNotify();
                }
            } finally {
                pollLock.unlock();
            }
        }
    }

    /**
     * Progress thread: polls the CQ once, then runs {@code afterPoll} still holding the poll lock (where a
     * closing connection tears down). Returns the completions found, or {@link #CALLER_POLLING}.
     */
    int progress(Runnable afterPoll) {
        if (spinningCallers.get() > 0 || !pollLock.tryLock()) {
            return CALLER_POLLING;
        }
        try {
            if (completions == null) {
                return 0;
            }
            int n;
            try {
                n = reap();
            } finally {
                // a closing connection still tears down when its completions' handling throws
                afterPoll.run();
            }
            return Math.max(n, 0);
        } finally {
            pollLock.unlock();
        }
    }

    /** Under pollLock: one ibv_poll_cq, each completion dispatched in this thread. */
    private int reap() {
        Completions c = completions;
        int n = c.poll();
        for (int i = 0; i < n; i++) {
            handler.onCompletion(c.wrId(i), c.status(i), c.byteLength(i));
        }
        if (n < 0) {
            handler.onPollFailure(n);
        }
        return n;
    }

    /**
     * A caller waiting for {@code operation}: polls the CQ itself until it is done, the deadline or the spin
     * budget has passed. Returns true when done; otherwise the caller is counted as blocked (so the
     * progress thread polls for it) until it calls {@link #unblocked}.
     */
    boolean spin(CompletableFuture<?> operation, long deadlineNanos) {
        callerWaits++; // a lost increment between two racing callers is harmless: any change counts
        // While a caller spins the progress thread keeps off this CQ: it would only hold the poll lock the caller
        // needs, to reap the caller's own completion. A caller that stops spinning counts as blocked before it
        // stops counting as spinning, so the progress thread never takes the CQ for nobody's.
        spinningCallers.incrementAndGet();
        try {
            if (awaitSpinNanos > 0) {
                spinUntilDone(operation, deadlineNanos);
            }
            if (operation.isDone()) {
                return true;
            }
            blockedCallers.incrementAndGet();
        } finally {
            spinningCallers.decrementAndGet();
        }
        armForBlockedCaller();
        return false;
    }

    /** The blocked caller of a {@link #spin} that returned false is done waiting. */
    void unblocked() {
        blockedCallers.decrementAndGet();
    }

    /**
     * The progress thread leaves a CQ that callers poll unarmed; a caller about to block arms it, so that its
     * completion wakes the progress thread, and reaps once for a completion that came before the arming.
     * When the poll lock is busy, another caller is polling and reaps for everyone.
     */
    private void armForBlockedCaller() {
        if (pollLock.tryLock()) {
            try {
                if (completions != null) {
                    completions.requestNotify();
                    reap();
                }
            } finally {
                pollLock.unlock();
            }
        }
    }

    /**
     * Whether this CQ is, for now, its callers' to poll: one spins on it, or did within about
     * {@code recentNanos}, and none is blocked waiting for the progress thread. Called by the progress thread
     * only, which times the callers' waits with its own clock.
     */
    boolean polledByCaller(long now, long recentNanos) {
        if (blockedCallers.get() > 0) {
            return false;
        }
        int waits = callerWaits;
        if (spinningCallers.get() > 0 || waits != callerWaitsSeen) {
            callerWaitsSeen = waits;
            callerSeenAt = now;
            return true;
        }
        return now - callerSeenAt < recentNanos;
    }

    /** Polls until the operation is done, the deadline or the spin budget has passed, or the CQ is torn down. */
    private void spinUntilDone(CompletableFuture<?> operation, long deadlineNanos) {
        // The clock is read every CLOCK_EVERY_POLLS polls only: where the clock source is slow (a VM without a
        // usable TSC makes every read a system call) reading it per poll costs more than the poll.
        long spinUntil = 0;
        boolean spinning = false; // from the first clock read on: the spin starts a few polls late
        int polls = 0;
        while (!operation.isDone()) {
            if (++polls % CLOCK_EVERY_POLLS == 0) {
                long now = System.nanoTime();
                if (now - deadlineNanos >= 0) {
                    return;
                }
                if (!spinning) {
                    spinning = true;
                    spinUntil = now + awaitSpinNanos;
                } else if (now - spinUntil >= 0) {
                    return;
                }
            }
            if (pollLock.tryLock()) {
                try {
                    if (torn || completions == null) {
                        return; // torn down: what was pending has been failed
                    }
                    reap();
                } finally {
                    pollLock.unlock();
                }
            } else {
                Thread.onSpinWait();
            }
            if (!operation.isDone()) {
                sharedReceives.getAsInt();
            }
        }
    }
}
