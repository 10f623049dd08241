package io.rdma4j.netty;

import io.netty.channel.IoEvent;
import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.rdma4j.core.ConnectionPoller;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.IntConsumer;

/**
 * The I/O side of an event loop of this transport: channels registered on it receive the completions of their
 * rdma4j connection (messages, sends, connects, accepts), which rdma4j's threads post here; the loop hands them to
 * the channels in the order posted. Make a group with
 * {@code new MultiThreadIoEventLoopGroup(RdmaIoHandler.newFactory(transport))} and use {@link RdmaSocketChannel} and
 * {@link RdmaServerSocketChannel} on it.
 *
 * <p>The transport belongs to the caller, who closes it after the group has shut down: every rdma4j setting
 * (provider, shared secret, bounds, timeouts) is the transport's.
 */
public final class RdmaIoHandler implements IoHandler {

    private static final System.Logger LOG = System.getLogger(RdmaIoHandler.class.getName());

    private final ThreadAwareExecutor executor;
    private final RdmaTransport transport;
    private final long spinNanos;
    /** Where the loop waits: it reads the channels' connections itself where the provider lets it (tcp). */
    private final ConnectionPoller poller;
    private final ConcurrentLinkedQueue<Ready> ready = new ConcurrentLinkedQueue<>();
    /** Loop thread only. */
    private final Set<Registration> registrations = new HashSet<>();
    private volatile Thread thread;
    private volatile boolean sleeping;
    private volatile boolean woken;
    /** Loop thread only: where small flushed buffers are gathered into one message (send copies it at once). */
    private ByteBuffer gather;

    private RdmaIoHandler(ThreadAwareExecutor executor, RdmaTransport transport, long spinNanos) {
        this.executor = Objects.requireNonNull(executor, "executor");
        this.transport = transport;
        this.spinNanos = spinNanos;
        this.poller = transport.openPoller();
    }

    /** Event loops over {@code transport}, which the caller opened and closes after the group has shut down. */
    public static IoHandlerFactory newFactory(RdmaTransport transport) {
        return newFactory(transport, Duration.ZERO);
    }

    /**
     * As {@link #newFactory(RdmaTransport)}; an idle loop first checks for completions for up to {@code spin} before
     * it sleeps, which saves the wake-up of a loop whose peer answers within that time, at the cost of a busy core.
     */
    public static IoHandlerFactory newFactory(RdmaTransport transport, Duration spin) {
        Objects.requireNonNull(transport, "transport");
        if (spin.isNegative() || spin.compareTo(Duration.ofMillis(10)) > 0) {
            throw new IllegalArgumentException("spin must be between 0 and 10 ms, got " + spin);
        }
        long spinNanos = spin.toNanos();
        return executor -> new RdmaIoHandler(executor, transport, spinNanos);
    }

    RdmaTransport transport() {
        return transport;
    }

    ByteBuffer gatherBuffer(int size) {
        if (gather == null || gather.capacity() < size) {
            gather = ByteBuffer.allocate(size);
        }
        return gather.clear();
    }

    @Override
    public int run(IoHandlerContext context) {
        if (thread == null) {
            thread = Thread.currentThread();
        }
        int handled = drain();
        long waitNanos = 0;
        if (handled == 0 && context.canBlock()) {
            if (spinNanos > 0) {
                long end = System.nanoTime() + Math.min(spinNanos, context.delayNanos(System.nanoTime()));
                while (ready.isEmpty() && !woken && System.nanoTime() < end) {
                    poller.poll(0);
                    Thread.onSpinWait();
                }
            }
            waitNanos = context.delayNanos(System.nanoTime());
        }
        if (waitNanos > 0) {
            sleeping = true;
            if (!ready.isEmpty() || woken) {
                waitNanos = 0;
            }
        }
        // reads the attached connections: what they complete is posted to this loop's queue, drained below
        poller.poll(waitNanos);
        sleeping = false;
        handled += drain();
        woken = false;
        return handled;
    }

    /** Loop thread: the loop reads {@code connection} itself from now on, where its provider lets it. */
    void attach(RdmaConnection connection) {
        poller.attach(connection);
    }

    /** Loop thread: {@code connection}'s reading goes back to rdma4j's threads (the channel leaves this loop). */
    void detach(RdmaConnection connection) {
        poller.detach(connection);
    }

    /** Loop thread: watches a channel's plain socket (its peer does not run rdma4j) where the loop waits. */
    SelectionKey watch(SelectableChannel socket, int ops, IntConsumer ready) throws IOException {
        return poller.watch(socket, ops, readyOps -> {
            try {
                ready.accept(readyOps);
            } catch (Throwable t) {
                // a channel's failure must not end the loop that serves the others
                LOG.log(System.Logger.Level.WARNING, "rdma4j channel failed to handle its plain socket", t);
            }
        });
    }

    /** Hands what rdma4j's threads posted to the channels, at most a bounded batch so tasks get their turn. */
    private int drain() {
        int handled = 0;
        Ready r;
        while (handled < 1024 && (r = ready.poll()) != null) {
            try {
                if (r.registration.valid) {
                    r.registration.handle.handle(r.registration, r.event);
                } else {
                    r.registration.handle.orphaned(r.event);
                }
            } catch (Throwable t) {
                // a channel's failure must not end the loop that serves the others
                LOG.log(System.Logger.Level.WARNING, "rdma4j channel failed to handle " + r.event, t);
            }
            handled++;
        }
        return handled;
    }

    /** From any thread: queues {@code event} for the handle and wakes the loop if it sleeps. */
    void post(Registration registration, IoEvent event) {
        ready.add(new Ready(registration, event));
        if (sleeping && Thread.currentThread() != thread) {
            poller.wakeup();
        }
    }

    @Override
    public void wakeup() {
        if (!executor.isExecutorThread(Thread.currentThread())) {
            woken = true;
            if (sleeping) {
                poller.wakeup();
            }
        }
    }

    @Override
    public void prepareToDestroy() {
        for (Registration r : new ArrayList<>(registrations)) {
            try {
                r.handle.close();
            } catch (Exception e) {
                // closing a channel reports its own failures to its pipeline
            }
        }
    }

    @Override
    public void destroy() {
        poller.close();
        Ready r;
        while ((r = ready.poll()) != null) {
            if (r.event instanceof RdmaEvent e) {
                e.discard();
            }
        }
    }

    @Override
    public IoRegistration register(IoHandle handle) {
        if (!(handle instanceof RdmaIoHandle h)) {
            throw new IllegalArgumentException("IoHandle of type " + handle.getClass().getName() + " not supported");
        }
        Registration registration = new Registration(h);
        registrations.add(registration);
        h.registered();
        return registration;
    }

    @Override
    public boolean isCompatible(Class<? extends IoHandle> handleType) {
        return RdmaIoHandle.class.isAssignableFrom(handleType);
    }

    /** A channel's registration: rdma4j's threads post its events through it while it is valid. */
    final class Registration implements IoRegistration {
        private final RdmaIoHandle handle;
        private volatile boolean valid = true;

        private Registration(RdmaIoHandle handle) {
            this.handle = handle;
        }

        RdmaIoHandler handler() {
            return RdmaIoHandler.this;
        }

        /** False once cancelled: the caller finds another way for the event. */
        boolean post(IoEvent event) {
            if (!valid) {
                return false;
            }
            RdmaIoHandler.this.post(this, event);
            return true;
        }

        /** This registration itself: the event loop hands channels a wrapper of it. */
        @Override
        @SuppressWarnings("unchecked")
        public <T> T attachment() {
            return (T) this;
        }

        @Override
        public long submit(IoOps ops) {
            throw new UnsupportedOperationException("rdma4j channels need no I/O operations submitted");
        }

        @Override
        public boolean isValid() {
            return valid;
        }

        @Override
        public boolean cancel() {
            if (!valid) {
                return false;
            }
            valid = false;
            if (executor.isExecutorThread(Thread.currentThread())) {
                cancel0();
            } else {
                executor.execute(this::cancel0);
            }
            return true;
        }

        private void cancel0() {
            if (registrations.remove(this)) {
                handle.unregistered();
            }
        }
    }

    private record Ready(Registration registration, IoEvent event) {
    }
}
