package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.spi.ProviderRegion;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A tcp registration: a random key mapped to live memory. Serving a peer's request pins the region
 * (per connection), so {@link #close()} can revoke the key at once and then wait for in-flight serves.
 * Pinning takes no lock the region's other connections share: a region served to many peers at once is pinned
 * by all their reader threads, and a thread preempted while holding a shared monitor stalled them all.
 */
final class TcpRegion implements ProviderRegion {

    private static final System.Logger LOG = System.getLogger(TcpRegion.class.getName());

    private final TcpTransport transport;
    private final MemorySegment segment;
    private final Set<Access> access;
    private final long key;
    /** Serves in flight per connection; a connection's entry is touched by its own threads only, until closing. */
    private final ConcurrentHashMap<TcpConnection, Integer> serving = new ConcurrentHashMap<>();
    private volatile boolean revoked;

    TcpRegion(TcpTransport transport, MemorySegment segment, Set<Access> access, long key) {
        this.transport = transport;
        this.segment = segment;
        this.access = Set.copyOf(access);
        this.key = key;
    }

    @Override
    public long key() {
        return key;
    }

    MemorySegment segment() {
        return segment;
    }

    boolean allows(Access right) {
        return access.contains(right);
    }

    /**
     * Marks a serve by {@code connection}; false once the key is revoked. Counted before {@code revoked} is read,
     * while {@link #close} sets it before it reads the counts: either the serve sees the revocation, or close
     * waits for the serve.
     */
    boolean pin(TcpConnection connection) {
        if (revoked) {
            return false;
        }
        serving.merge(connection, 1, Integer::sum);
        if (revoked) {
            unpin(connection);
            return false;
        }
        return true;
    }

    void unpin(TcpConnection connection) {
        serving.computeIfPresent(connection, (c, n) -> n == 1 ? null : n - 1);
        if (revoked && serving.isEmpty()) {
            synchronized (this) {
                notifyAll();
            }
        }
    }

    boolean isRevoked() {
        return revoked;
    }

    @Override
    public void close() {
        synchronized (this) {
            if (revoked) {
                return;
            }
            revoked = true;
        }
        transport.forget(this);
        Duration wait = transport.options().regionCloseTimeout();
        if (awaitIdle(wait)) {
            return;
        }
        // A serve is stuck in a socket read or write (a peer not draining its data): closing its
        // connection aborts the I/O, so close() never hangs on a misbehaving peer.
        List<TcpConnection> stuck = List.copyOf(serving.keySet());
        LOG.log(System.Logger.Level.WARNING, "region still served after " + wait + " once deregistered; closing "
                + stuck.size() + " connection(s) that hold it");
        stuck.forEach(TcpConnection::close);
        if (!awaitIdle(wait)) {
            LOG.log(System.Logger.Level.ERROR, "region still served after closing its connections; giving up waiting");
        }
    }

    private synchronized boolean awaitIdle(Duration wait) {
        long deadline = System.nanoTime() + wait.toNanos();
        boolean interrupted = false;
        try {
            while (!serving.isEmpty()) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            return true;
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
