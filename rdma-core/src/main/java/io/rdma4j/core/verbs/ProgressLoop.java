package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Poll;
import io.rdma4j.nativeloader.Verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * The progress thread: polls the CQs of the attached connections, arming them and sleeping on the
 * transport's completion channel when idle. With {@code verbs.busy-poll=true} it never sleeps: it spins on
 * the CQs as perftest does, trading one CPU core (busy even when idle) for the channel's wake-up latency.
 * It runs until stopped and every attached connection has closed.
 */
final class ProgressLoop implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(ProgressLoop.class.getName());
    private static final int POLL_TIMEOUT_MS = 50;
    private static final long SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
    /**
     * A CQ whose caller polled it this recently is left to callers: this thread neither arms it nor polls it
     * more often than every CALLER_RECENT_SLEEP_MS, and sleeps at most that long.
     */
    private static final long CALLER_RECENT_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final int CALLER_RECENT_SLEEP_MS = 2;
    private static final long CALLER_RECENT_SLEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(CALLER_RECENT_SLEEP_MS);

    private final MemorySegment completionChannel;
    private final boolean busyPoll;
    /** Connections this thread polls (established ones). */
    private final List<VerbsConnection> attached = new CopyOnWriteArrayList<>();
    private volatile boolean running = true;
    private final Thread thread;

    ProgressLoop(MemorySegment completionChannel, boolean busyPoll) {
        this.completionChannel = completionChannel;
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
                    if (callerCqsTurn || !c.polling().polledByCaller(now, CALLER_RECENT_NANOS)) {
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
                    if (c.polling().polledByCaller(now, CALLER_RECENT_NANOS)) {
                        unarmed = true;
                    } else {
                        c.polling().arm();
                        // a completion that arrived before arming raises no event: look once more before sleeping
                        any |= c.progress() > 0;
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
        }
    }

    /** Stops the thread once every attached connection has closed, and waits for it. */
    @Override
    public void close() {
        running = false;
        VerbsTransport.join(thread);
    }
}
