package io.rdma4j.core.tcp;

import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderPoller;

import java.io.IOException;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;

/**
 * An event loop's selector over the plain sockets of the connections attached to it: the loop's thread reads each
 * as its input arrives ({@link PolledReading}). A socket's interest is set only while the poller holds the
 * connection's lead, so the selector never reports a socket that a reader thread is reading.
 */
final class TcpPoller implements ProviderPoller {

    /**
     * A loop that has not polled for this long is busy (or blocked in a handler): its connections' reader threads
     * take the lead meanwhile, so that the peer's frames (a close, keep-alives) are read whatever the loop does.
     */
    static final long STALL_MILLIS = 25;

    private final Selector selector;
    private final Set<PolledReading> attached = ConcurrentHashMap.newKeySet();
    private final ScheduledFuture<?> watchdog;
    private volatile boolean polling;
    private volatile long lastPolled = System.nanoTime();
    /** Connections that stopped with whole frames still buffered: read again without waiting. Polling thread only. */
    private final ArrayDeque<PolledReading> again = new ArrayDeque<>();
    private volatile Thread thread;

    TcpPoller(ScheduledExecutorService timers) throws IOException {
        this.selector = Selector.open();
        this.watchdog = timers.scheduleWithFixedDelay(this::wakeIfStalled, STALL_MILLIS, STALL_MILLIS, TimeUnit.MILLISECONDS);
    }

    /** Whether the polling thread has been away from {@link #poll} for longer than {@link #STALL_MILLIS}. */
    boolean stalled() {
        return !polling && System.nanoTime() - lastPolled > TimeUnit.MILLISECONDS.toNanos(STALL_MILLIS);
    }

    private void wakeIfStalled() {
        if (stalled()) {
            for (PolledReading r : attached) {
                r.wake();
            }
        }
    }

    void forget(PolledReading reading) {
        attached.remove(reading);
    }

    @Override
    public boolean attach(ProviderConnection connection) {
        return connection instanceof TcpConnection c && c.pollOn(this);
    }

    @Override
    public void detach(ProviderConnection connection) {
        if (connection instanceof TcpConnection c) {
            c.stopPolling(this);
        }
    }

    /** The key through which this poller watches {@code socket} for {@code reading}; no interest yet. */
    SelectionKey register(SocketChannel socket, PolledReading reading) throws ClosedChannelException {
        SelectionKey key = socket.register(selector, 0, reading);
        attached.add(reading);
        return key;
    }

    @Override
    public SelectionKey watch(SelectableChannel channel, int ops, IntConsumer ready) throws IOException {
        return channel.register(selector, ops, ready);
    }

    /**
     * Sets {@code key}'s interest (under the connection's lead lock); false when the key is no longer valid. From
     * another thread than the polling one the selector is woken, so that it waits with the new interest.
     */
    boolean interest(SelectionKey key, int ops) {
        try {
            key.interestOps(ops);
        } catch (CancelledKeyException e) {
            return false;
        }
        if (ops != 0 && Thread.currentThread() != thread) {
            selector.wakeup();
        }
        return true;
    }

    /** Polling thread: reads {@code reading} again at the next poll, without waiting for its socket. */
    void readAgain(PolledReading reading) {
        again.add(reading);
    }

    @Override
    public void poll(long timeoutNanos) throws IOException {
        thread = Thread.currentThread();
        long millis = (timeoutNanos + 500_000) / 1_000_000;
        polling = true;
        try {
            if (millis <= 0 || !again.isEmpty()) {
                selector.selectNow(this::ready);
            } else {
                selector.select(this::ready, millis);
            }
        } finally {
            lastPolled = System.nanoTime();
            polling = false;
        }
        for (int n = again.size(); n > 0; n--) {
            again.poll().ready(0);
        }
    }

    private void ready(SelectionKey key) {
        int ops;
        try {
            ops = key.readyOps();
        } catch (CancelledKeyException e) {
            return; // the socket closed: the reader thread that took the lead finishes the connection
        }
        if (key.attachment() instanceof PolledReading reading) {
            reading.ready(ops);
        } else {
            ((IntConsumer) key.attachment()).accept(ops); // an application's socket
        }
    }

    @Override
    public void wakeup() {
        selector.wakeup();
    }

    @Override
    public void close() {
        watchdog.cancel(false);
        for (SelectionKey key : new ArrayList<>(selector.keys())) {
            if (key.attachment() instanceof PolledReading reading) {
                reading.detach();
            }
        }
        again.clear();
        try {
            selector.close();
        } catch (IOException ignored) {
            // nothing left to release
        }
    }
}
