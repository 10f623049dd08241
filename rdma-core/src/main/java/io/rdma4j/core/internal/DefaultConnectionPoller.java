package io.rdma4j.core.internal;

import io.rdma4j.core.ConnectionPoller;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ProviderPoller;

import java.io.IOException;
import java.util.concurrent.locks.LockSupport;

/**
 * The transport's {@link ConnectionPoller}: the provider's poller where it has one, else a thread that parks until
 * woken, which reads nothing itself.
 */
final class DefaultConnectionPoller implements ConnectionPoller {

    /** Null where the provider has no poller. */
    private final ProviderPoller provider;
    private volatile Thread thread;
    /** Set before the unpark: a wake-up that comes before the polling thread is known is not lost. */
    private volatile boolean woken;

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
        if (!woken && timeoutNanos > 0) {
            LockSupport.parkNanos(this, timeoutNanos);
        }
        woken = false;
    }

    @Override
    public void wakeup() {
        if (provider != null) {
            provider.wakeup();
            return;
        }
        woken = true;
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
    }
}
