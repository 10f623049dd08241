package io.rdma4j.spark;

import io.rdma4j.core.RdmaConnection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * This executor's connections to its peers' endpoints: opened at the first fetch from a peer, shared by the
 * reducers reading from it, and closed once no reducer has held one for {@code spark.shuffle.rdma.connectionIdleTimeout}
 * (Spark's {@code spark.shuffle.io.connectionTimeout} by default, as Spark's own shuffle client closes idle
 * channels), so an executor keeps connections only to the peers it reads from now. A reducer holds a {@link Lease}
 * from its first READ to the end of its task: an idle close never pulls a connection from under a fetch. The next
 * fetch from a closed peer connects again; {@link RdmaShuffleMetrics} counts both.
 */
final class PeerConnections implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(PeerConnections.class);

    /** Opens a connection to a peer's endpoint. */
    interface Connector {
        RdmaConnection connect(String peerExecutorId, InetSocketAddress address) throws PeerUnreachableException;
    }

    /** A reducer's use of one peer connection, until its task ends. */
    final class Lease implements AutoCloseable {
        private final Entry entry;
        private boolean closed;

        private Lease(Entry entry) {
            this.entry = entry;
        }

        RdmaConnection connection() {
            return entry.connection;
        }

        @Override
        public void close() {
            synchronized (entries) {
                if (closed) {
                    return;
                }
                closed = true;
                if (--entry.holders == 0) {
                    entry.idleSinceNanos = System.nanoTime();
                }
            }
        }
    }

    private static final class Entry {
        final RdmaConnection connection;
        int holders;
        long idleSinceNanos = System.nanoTime();

        Entry(RdmaConnection connection) {
            this.connection = connection;
        }
    }

    private final Duration idleTimeout;
    private final Connector connector;
    /** Guards itself and every entry's holders; never held while connecting or closing. */
    private final Map<String, Entry> entries = new HashMap<>();
    /** Peers this executor was connected to once: connecting to one again counts as a reconnect. */
    private final Set<String> known = new HashSet<>();
    /** One per peer: connecting happens outside {@link #entries}' lock, one connect per peer at a time. */
    private final Map<String, Object> connectLocks = new ConcurrentHashMap<>();
    private final ScheduledExecutorService reaper;

    PeerConnections(Duration idleTimeout, Connector connector) {
        this.idleTimeout = idleTimeout;
        this.connector = connector;
        this.reaper = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "rdma4j-shuffle-idle-connections");
            t.setDaemon(true);
            return t;
        });
        long period = Math.max(50, Math.min(idleTimeout.toMillis() / 4, 10_000));
        reaper.scheduleWithFixedDelay(this::closeIdle, period, period, TimeUnit.MILLISECONDS);
    }

    /**
     * A lease on an open connection to {@code peerExecutorId}, connecting to {@code address} when there is none. One
     * connection per peer: concurrent first fetches from a peer wait for the one connecting.
     */
    Lease acquire(String peerExecutorId, InetSocketAddress address) throws PeerUnreachableException {
        synchronized (connectLock(peerExecutorId)) {
            synchronized (entries) {
                Entry e = entries.get(peerExecutorId);
                if (e != null && e.connection.isOpen()) {
                    e.holders++;
                    return new Lease(e);
                }
                if (e != null) {
                    entries.remove(peerExecutorId);
                }
            }
            RdmaConnection c = connector.connect(peerExecutorId, address);
            synchronized (entries) {
                Entry e = new Entry(c);
                e.holders = 1;
                entries.put(peerExecutorId, e);
                if (!known.add(peerExecutorId)) {
                    RdmaShuffleMetrics.RECONNECTS.inc();
                }
                return new Lease(e);
            }
        }
    }

    private Object connectLock(String peerExecutorId) {
        return connectLocks.computeIfAbsent(peerExecutorId, k -> new Object());
    }

    /** Drops {@code connection} to a peer (broken, or the peer is gone); its holders see it closed. */
    void forget(String peerExecutorId, RdmaConnection connection) {
        synchronized (entries) {
            Entry e = entries.get(peerExecutorId);
            if (e != null && e.connection == connection) {
                entries.remove(peerExecutorId);
            }
        }
        connection.close();
    }

    /** Open connections now. */
    int size() {
        synchronized (entries) {
            return entries.size();
        }
    }

    /** Closes the connections no reducer has held for the idle timeout. */
    void closeIdle() {
        List<Map.Entry<String, Entry>> idle = new ArrayList<>();
        long now = System.nanoTime();
        synchronized (entries) {
            var it = entries.entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry<String, Entry> e = it.next();
                if (e.getValue().holders == 0 && now - e.getValue().idleSinceNanos >= idleTimeout.toNanos()) {
                    it.remove();
                    idle.add(e);
                }
            }
        }
        for (Map.Entry<String, Entry> e : idle) {
            LOG.debug("rdma4j shuffle: closing the connection to executor {}, unused for {} ms", e.getKey(), idleTimeout.toMillis());
            // Counted first: whoever sees the connection closed sees it counted.
            RdmaShuffleMetrics.IDLE_CONNECTIONS_CLOSED.inc();
            e.getValue().connection.close();
        }
    }

    @Override
    public void close() {
        reaper.shutdownNow();
        List<Entry> all;
        synchronized (entries) {
            all = new ArrayList<>(entries.values());
            entries.clear();
        }
        all.forEach(e -> e.connection.close());
    }
}
