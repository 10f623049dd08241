package io.rdma4j.core.internal;

import io.rdma4j.core.ConnectionPoller;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ProviderPoller;

import java.io.IOException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntConsumer;

/**
 * The transport's {@link ConnectionPoller}: the provider's poller where it has one, else a thread that parks until
 * woken, which reads nothing itself, or once it watches an application's socket, waits in a selector over those.
 */
final class DefaultConnectionPoller implements ConnectionPoller {

    /** Null where the provider has no poller. */
    private final ProviderPoller provider;
    private volatile Thread thread;
    /** Set before the unpark: a wake-up that comes before the polling thread is known is not lost. */
    private volatile boolean woken;
    /** Without a provider poller: the application's sockets, once one is watched. Opened by the polling thread. */
    private volatile Selector sockets;

    DefaultConnectionPoller(ProviderPoller provider) {
        this.provider = provider;
    }

    @Override
    public boolean attach(RdmaConnection connection) {
        return provider != null && connection instanceof DefaultConnection c && c.attachTo(provider);
    }

    @Override
    public void detach(RdmaConnection connection) {
        if (provider != null && connection instanceof DefaultConnection c) {
            c.detachFrom(provider);
        }
    }

    @Override
    public SelectionKey watch(SelectableChannel channel, int ops, IntConsumer ready) throws IOException {
        if (provider != null) {
            return provider.watch(channel, ops, ready);
        }
        if (sockets == null) {
            sockets = Selector.open();
        }
        return channel.register(sockets, ops, ready);
    }

    @Override
    public void poll(long timeoutNanos) {
        if (provider != null) {
            try {
                provider.poll(timeoutNanos);
            } catch (IOException e) {
                throw new RdmaException("polling rdma4j connections failed: " + e.getMessage(), e);
            }
            return;
        }
        thread = Thread.currentThread();
        Selector s = sockets;
        if (s != null) {
            long millis = woken ? 0 : (timeoutNanos + 999_999) / 1_000_000;
            try {
                if (millis <= 0) {
                    s.selectNow(DefaultConnectionPoller::ready);
                } else {
                    s.select(DefaultConnectionPoller::ready, millis);
                }
            } catch (IOException e) {
                throw new RdmaException("polling the application's sockets failed: " + e.getMessage(), e);
            }
        } else if (!woken && timeoutNanos > 0) {
            LockSupport.parkNanos(this, timeoutNanos);
        }
        woken = false;
    }

    private static void ready(SelectionKey key) {
        try {
            ((IntConsumer) key.attachment()).accept(key.readyOps());
        } catch (java.nio.channels.CancelledKeyException e) {
            // the application stopped watching meanwhile
        }
    }

    @Override
    public void wakeup() {
        if (provider != null) {
            provider.wakeup();
            return;
        }
        woken = true;
        Selector s = sockets;
        if (s != null) {
            s.wakeup();
        }
        Thread t = thread;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    @Override
    public void close() {
        if (provider != null) {
            provider.close();
        }
        Selector s = sockets;
        if (s != null) {
            try {
                s.close(); // cancels the keys of the sockets still watched; the sockets stay the application's
            } catch (IOException ignored) {
                // nothing left to release
            }
        }
    }
}
