package io.rdma4j.core.tcp;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The threads that take turns reading one connection (leader/follower): one leads, reading and dispatching frames;
 * when it has read a request whose handler it may run itself, it makes a spare thread the leader first, so the handler
 * may block without stalling the connection, and becomes the spare once the handler is done. Waking the spare costs
 * the handler's thread one unpark, and the wake-up itself overlaps with the handler instead of delaying it. At most
 * {@link #MAX_THREADS} per connection: while every thread is busy in a handler (or has sent its reply and is not
 * back as the spare yet), {@link #handOff()} declines and the handler runs elsewhere.
 *
 * <p>A connection attached to a {@link TcpPoller} may also leave the lead with the poller (between frames, when
 * reading on would wait): then no thread leads until the poller's thread takes it to read what arrived, or a reader
 * thread takes it back ({@link #leadFromPoller}) because the socket closed or the connection left the poller. Every
 * move to or from the poller happens under this object's lock, with the poller's interest set to match.
 */
final class ReaderThreads {

    static final int MAX_THREADS = 2;
    private static final Object POLLED = new Object();

    private final String name;
    /** Reads while the calling thread leads; returns once it no longer does, or once the connection ended. */
    private final Runnable readLoop;
    /** Counted down once the connection finished: its last leader stopped reading for good. */
    private final CountDownLatch stopped = new CountDownLatch(1);
    /** The thread that reads, or {@link #POLLED}: the poller's thread takes the lead when input arrives. */
    private volatile Object leader;
    /** The poller's thread leads: it must not run handlers or block. */
    private volatile boolean pollerLeads;
    private volatile boolean ended;
    /** A thread waiting to lead; guarded by {@code this}. */
    private Thread spare;
    /** Threads started; guarded by {@code this}. */
    private int threads;

    ReaderThreads(String name, Runnable readLoop) {
        this.name = name;
        this.readLoop = readLoop;
    }

    /** Starts the first leader. */
    void start() {
        synchronized (this) {
            threads = 1;
        }
        Thread first = Thread.ofPlatform().daemon().name(name).unstarted(this::run);
        leader = first;
        first.start();
    }

    boolean leads() {
        return leader == Thread.currentThread();
    }

    /**
     * Called by the leader once it has consumed a frame: makes another thread the leader and returns true, so the
     * caller may run code that blocks and then return to the read loop, which it leaves; false when the caller does
     * not lead or no thread is free, and it must go on reading.
     */
    boolean handOff() {
        return leads() && !pollerLeads && passTo(Thread.currentThread(), () -> { }, MAX_THREADS);
    }

    /**
     * The leader leaves the lead with the poller; {@code arm} (which sets the poller's interest) runs under the lock
     * that every move from the poller takes, so the interest is set exactly while the poller holds the lead.
     */
    synchronized void leaveToPoller(Runnable arm) {
        pollerLeads = false;
        leader = POLLED;
        arm.run();
    }

    /** The poller's thread takes the lead, unless it is not the poller's; {@code disarm} runs under the lock. */
    synchronized boolean takeFromPoller(Runnable disarm) {
        if (leader != POLLED || ended) {
            return false;
        }
        leader = Thread.currentThread();
        pollerLeads = true;
        disarm.run();
        return true;
    }

    /** Runs {@code action} under the lock if the poller holds the lead. */
    synchronized void whilePolled(Runnable action) {
        if (leader == POLLED && !ended) {
            action.run();
        }
    }

    /** From any thread: if the poller holds the lead, a reader thread takes it; {@code disarm} runs under the lock. */
    boolean leadFromPoller(Runnable disarm) {
        return passTo(POLLED, disarm, Integer.MAX_VALUE);
    }

    /** The poller's thread, leading, gives the lead to a reader thread, which reads on where it would block. */
    boolean passToReader() {
        return leads() && passTo(Thread.currentThread(), () -> { }, Integer.MAX_VALUE);
    }

    /**
     * Makes a spare, else a new, reader thread the leader if {@code from} leads, with at most {@code maxThreads}
     * threads. Away from the poller there is no limit: someone must lead to see the connection end, and a thread too
     * many leaves once it finds a spare. False when {@code from} does not lead or no thread is to be had; the lead
     * then stays where it was.
     */
    private boolean passTo(Object from, Runnable disarm, int maxThreads) {
        Thread next;
        boolean fresh = false;
        boolean wasPollerLeads;
        synchronized (this) {
            if (leader != from || ended) {
                return false;
            }
            next = spare;
            if (next == null) {
                if (threads >= maxThreads) {
                    return false;
                }
                threads++;
                next = Thread.ofPlatform().daemon().name(name + "-" + threads).unstarted(this::run);
                fresh = true;
            }
            spare = null;
            wasPollerLeads = pollerLeads;
            pollerLeads = false;
            leader = next; // everything the old leader read happens-before the next leader's first read
            disarm.run();
        }
        if (!fresh) {
            LockSupport.unpark(next);
            return true;
        }
        try {
            next.start();
            return true;
        } catch (OutOfMemoryError | RuntimeException noThread) {
            // no thread to be had: the lead stays where it was, and a handler runs elsewhere
            synchronized (this) {
                threads--;
                leader = from;
                pollerLeads = wasPollerLeads;
            }
            return false;
        }
    }

    private void run() {
        Thread self = Thread.currentThread();
        while (true) {
            while (leader != self && !ended) {
                LockSupport.park(this);
            }
            if (leader != self) {
                return; // ended while spare
            }
            readLoop.run();
            if (ended) {
                return;
            }
            synchronized (this) {
                if (spare != null || ended) {
                    threads--;
                    return;
                }
                spare = self;
            }
        }
    }

    /** The connection finished (its last leader stopped reading, or it never started): every thread leaves. */
    void end() {
        ended = true;
        stopped.countDown();
        wakeSpare();
    }

    private void wakeSpare() {
        Thread s;
        synchronized (this) {
            s = spare;
        }
        if (s != null) {
            LockSupport.unpark(s);
        }
    }

    @Override
    public String toString() {
        return name;
    }

    /**
     * Waits until the read loop stopped for good, unless the caller leads (it is then the one to stop); false when
     * it did not within {@code timeout}.
     */
    boolean awaitStopped(Duration timeout) throws InterruptedException {
        return leads() || stopped.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
    }
}
