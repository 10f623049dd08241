package io.rdma4j.core.internal;

import io.rdma4j.core.Access;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.spi.ProviderRegion;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A registration as the transport tracks it. Local operations pin it ({@link #pin()}/{@link #unpin()})
 * so that {@link #close()} waits for them: the provider never touches memory the caller freed.
 */
final class DefaultRegion implements RegisteredRegion {

    private final DefaultRdmaTransport transport;
    private final MemorySegment segment;
    private final Set<Access> access;
    private final ProviderRegion providerRegion;
    private final RegionDescriptor descriptor;
    /** Pins of local operations in flight; the sign bit, {@link #CLOSED}, is set once close() begins. */
    private final AtomicInteger pinState = new AtomicInteger();
    private static final int CLOSED = Integer.MIN_VALUE;

    DefaultRegion(DefaultRdmaTransport transport, MemorySegment segment, Set<Access> access, ProviderRegion providerRegion) {
        this.transport = transport;
        this.segment = segment;
        this.access = Set.copyOf(access);
        this.providerRegion = providerRegion;
        this.descriptor = new RegionDescriptor(transport.provider(), segment.address(), segment.byteSize(),
                providerRegion.key(), this.access);
    }

    @Override
    public MemorySegment segment() {
        return segment;
    }

    @Override
    public RegionDescriptor descriptor() {
        return descriptor;
    }

    @Override
    public Set<Access> access() {
        return access;
    }

    ProviderRegion providerRegion() {
        return providerRegion;
    }

    long start() {
        return segment.address();
    }

    long end() {
        return segment.address() + segment.byteSize();
    }

    boolean contains(MemorySegment s) {
        return s.address() >= start() && s.address() + s.byteSize() <= end();
    }

    @Override
    public boolean isOpen() {
        return pinState.get() >= 0;
    }

    /**
     * Marks a local operation using this region; false if the region is already closed. Lock-free: every
     * operation pins and unpins, and a monitor's notify is a call into the VM that only a closer needs.
     */
    boolean pin() {
        int s;
        do {
            s = pinState.get();
            if (s < 0) {
                return false;
            }
        } while (!pinState.compareAndSet(s, s + 1));
        return true;
    }

    void unpin() {
        if (pinState.decrementAndGet() == CLOSED) { // the last pin of a closing region: its closer may wait
            synchronized (this) {
                notifyAll();
            }
        }
    }

    @Override
    public void close() {
        int s;
        do {
            s = pinState.get();
            if (s < 0) {
                return;
            }
        } while (!pinState.compareAndSet(s, s | CLOSED));
        transport.forget(this);
        // Revoke first, so peers are refused at once, then wait for our own operations on it: they end
        // within the operation timeout, because a timed-out operation closes its connection.
        try {
            providerRegion.close();
        } finally {
            awaitUnpinned();
            transport.metrics().regionDeregistered(segment.byteSize());
        }
    }

    private synchronized void awaitUnpinned() {
        boolean interrupted = false;
        while (pinState.get() != CLOSED) {
            try {
                wait();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return "RegisteredRegion[" + descriptor + (isOpen() ? "" : ", closed") + "]";
    }
}
