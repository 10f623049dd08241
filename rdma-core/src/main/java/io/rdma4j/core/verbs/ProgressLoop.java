package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Poll;
import io.rdma4j.nativeloader.Verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The progress thread: polls the shared receive CQ ({@link ReceiveCompletions}) and the send CQs of the attached
 * connections that have sends in flight, arming them all and sleeping on the transport's completion channel when
 * idle: a busy turn costs a poll per busy connection, not one per connection. With {@code verbs.busy-poll=true} it never sleeps: it spins on
 * the CQs as perftest does, trading one CPU core (busy even when idle) for the channel's wake-up latency.
 * It runs until stopped and every attached connection has closed, or the stop's grace period has passed: then
 * it tears down what is left itself, so that nothing it polls outlives the transport's device. A failure in one
 * connection's completions closes that connection only.
 */
final class ProgressLoop implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(ProgressLoop.class.getName());
    private static final int POLL_TIMEOUT_MS = 50;
    /** How long past the grace period a stop waits for the thread, which then only tears down. */
    private static final Duration JOIN_AFTER_GRACE = Duration.ofSeconds(5);
    private static final long SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
    /**
     * A CQ whose caller polled it this recently is left to callers: this thread neither arms it nor polls it
     * more often than every CALLER_RECENT_SLEEP_MS, and sleeps at most that long.
     */
    private static final long CALLER_RECENT_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final int CALLER_RECENT_SLEEP_MS = 2;
    private static final long CALLER_RECENT_SLEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(CALLER_RECENT_SLEEP_MS);
    /**
     * How often every connection's queue pair state is read: on a shared receive queue a queue pair can fail without
     * a completion, and not every device reports it as an event ({@link VerbsConnection#checkQueuePair}).
     */
    private static final long QUEUE_PAIR_CHECK_NANOS = TimeUnit.SECONDS.toNanos(1);
    /**
     * A connection that sent nothing for this long gives back the credits its peer lent it, at the next check: lent
     * credits stay with idle connections for one to two seconds.
     */
    private static final long IDLE_CREDITS_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final MemorySegment completionChannel;
    private final ReceiveCompletions receives;
    private final boolean busyPoll;
    /** Connections this thread polls (established ones). */
    private final List<VerbsConnection> attached = new CopyOnWriteArrayList<>();
    private volatile boolean running = true;
    /** Once stopped: when connections still attached are torn down whatever they still wait for. */
    private volatile long forceAt;
    private final Thread thread;

    ProgressLoop(MemorySegment completionChannel, ReceiveCompletions receives, boolean busyPoll) {
        this.completionChannel = completionChannel;
        this.receives = receives;
        this.busyPoll = busyPoll;
        this.thread = Thread.ofPlatform().daemon().name("rdma4j-verbs-progress").start(this::run);
    }

    void attach(VerbsConnection c) {
        attached.add(c);
    }

    void detach(VerbsConnection c) {
        attached.remove(c);
    }

    List<VerbsConnection> attached() {
        return attached;
    }

    private void run() {
        try (Arena a = Arena.ofConfined()) {
            Poll poll = Poll.forReading(Verbs.completionChannelFd(completionChannel), a);
            MemorySegment eventScratch = Verbs.completionEventScratch(a);
            long idleSince = System.nanoTime();
            long callerCqsPolledAt = idleSince;
            long queuePairsCheckedAt = idleSince;
            while (running || !attached.isEmpty()) {
                if (!running && System.nanoTime() - forceAt >= 0) {
                    break;
                }
                // A CQ that a caller polls, or polled just now, is left to that caller: polling it here too would
                // hold the poll lock the caller needs, to reap the caller's own completion. It is still polled
                // here every CALLER_RECENT_SLEEP_MS, for what no caller waits for (a message, a completion of
                // an asynchronous operation).
                long now = System.nanoTime();
                if (now - queuePairsCheckedAt >= QUEUE_PAIR_CHECK_NANOS) {
                    queuePairsCheckedAt = now;
                    for (VerbsConnection c : attached) {
                        try {
                            c.checkQueuePair();
                            c.releaseIdleCredits(now, IDLE_CREDITS_NANOS);
                        } catch (RuntimeException e) {
                            fail(c, e);
                        }
                    }
                }
                boolean callerCqsTurn = now - callerCqsPolledAt >= CALLER_RECENT_SLEEP_NANOS;
                if (callerCqsTurn) {
                    callerCqsPolledAt = now;
                }
                boolean any = receives.tryPoll() > 0;
                for (VerbsConnection c : attached) {
                    if (c.awaitsCompletions() && (callerCqsTurn || !c.polling().polledByCaller(now, CALLER_RECENT_NANOS))) {
                        any |= progress(c) > 0;
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
                receives.arm();
                // a receive that completed before arming raises no event: look once more before sleeping
                any |= receives.tryPoll() > 0;
                boolean unarmed = false;
                for (VerbsConnection c : attached) {
                    if (c.polling().polledByCaller(now, CALLER_RECENT_NANOS)) {
                        unarmed = true;
                    } else {
                        try {
                            c.polling().arm();
                        } catch (RuntimeException e) {
                            fail(c, e);
                        }
                        // a completion that arrived before arming raises no event: look once more before sleeping
                        any |= progress(c) > 0;
                    }
                }
                if (!any && poll.awaitReadable(unarmed ? CALLER_RECENT_SLEEP_MS : POLL_TIMEOUT_MS)) {
                    do {
                        Verbs.acknowledgeCompletionEvent(completionChannel, eventScratch);
                    } while (poll.awaitReadable(0));
                }
                idleSince = System.nanoTime();
            }
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.ERROR, "rdma4j verbs progress thread failed", e);
        } finally {
            // stopped past the grace period, or failed: nobody polls these any more, so they are torn down here
            for (VerbsConnection c : attached) {
                try {
                    c.forceFinish();
                } catch (RuntimeException | Error e) {
                    LOG.log(System.Logger.Level.ERROR, "tearing down " + c + " failed", e);
                }
                attached.remove(c);
            }
        }
    }

    /** One connection's turn: what it throws closes it, never this thread. */
    private static int progress(VerbsConnection c) {
        try {
            return c.progress();
        } catch (RuntimeException e) {
            fail(c, e);
            return 0;
        }
    }

    private static void fail(VerbsConnection c, RuntimeException e) {
        try {
            c.failed(e);
        } catch (RuntimeException again) {
            LOG.log(System.Logger.Level.ERROR, "closing " + c + " after a failure failed", again);
        }
    }

    /**
     * Stops the thread once every attached connection has closed; those still attached after {@code grace}
     * are torn down, their waiting operations failed as closed. Returns whether the thread ended within
     * {@code grace} and the join's bound: false means it may still touch native memory, which must then stay.
     */
    boolean stop(Duration grace) {
        forceAt = System.nanoTime() + grace.toNanos();
        running = false;
        try {
            thread.join(grace.plus(JOIN_AFTER_GRACE));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return !thread.isAlive();
    }

    @Override
    public void close() {
        stop(Duration.ZERO);
    }
}
