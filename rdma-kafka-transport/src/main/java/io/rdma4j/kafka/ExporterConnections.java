package io.rdma4j.kafka;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A consumer's connections to log exporters, one per exporter address (one per broker it reads from). An exporter
 * that could not be reached is tried again only after {@code rdma.fetch.fallback.backoff.ms}, so a dead broker costs
 * one connect timeout per backoff period, not one per poll. Used by the polling thread only.
 */
final class ExporterConnections implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(ExporterConnections.class);

    private final RdmaTransport transport;
    private final Duration reconnectBackoff;
    private final Map<InetSocketAddress, RdmaConnection> open = new HashMap<>();
    private final Map<InetSocketAddress, Long> retryAtNanos = new HashMap<>();

    ExporterConnections(RdmaTransport transport, Duration reconnectBackoff) {
        this.transport = transport;
        this.reconnectBackoff = reconnectBackoff;
    }

    /** The open connection to {@code exporter}, connecting if needed; null while it cannot be reached. */
    RdmaConnection get(InetSocketAddress exporter) {
        RdmaConnection c = open.get(exporter);
        if (c != null && c.isOpen()) {
            return c;
        }
        drop(exporter);
        Long retryAt = retryAtNanos.get(exporter);
        if (retryAt != null && System.nanoTime() - retryAt < 0) {
            return null;
        }
        try {
            c = transport.connect(exporter).get(transport.config().connectTimeout().toMillis() + 1000, TimeUnit.MILLISECONDS);
            open.put(exporter, c);
            retryAtNanos.remove(exporter);
            return c;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (Exception e) {
            retryAtNanos.put(exporter, System.nanoTime() + reconnectBackoff.toNanos());
            LOG.debug("cannot reach the rdma4j log exporter at {}: {}", exporter, e.toString());
            return null;
        }
    }

    /** Closes the connection to {@code exporter}, failing what is still in flight on it; whether there was one. */
    boolean drop(InetSocketAddress exporter) {
        RdmaConnection c = open.remove(exporter);
        if (c != null) {
            c.close();
        }
        return c != null;
    }

    @Override
    public void close() {
        List.copyOf(open.keySet()).forEach(this::drop);
    }
}
