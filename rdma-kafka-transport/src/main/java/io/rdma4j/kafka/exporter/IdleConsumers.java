package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RequestHandler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Closes consumer connections that sent no request for {@code rdma.exporter.connections.max.idle.ms}, as a broker
 * closes idle client connections: an exporter serves every consumer of its broker, and each connection holds the
 * transport's resources. A consumer that reads by one-sided READ alone (which the exporter does not see) sends
 * {@link io.rdma4j.core.RequestTypes#KAFKA_KEEPALIVE}; a closed consumer connects again at its next fetch.
 */
final class IdleConsumers {

    private static final Logger LOG = LoggerFactory.getLogger(LogExporter.class);

    /** The answer to a keepalive: nothing. */
    static final RequestHandler KEEPALIVE = RequestHandler.answering((body, context) -> ByteBuffer.allocate(0));

    private final Duration maxIdle;
    private final Map<RdmaConnection, Long> lastRequestNanos = new ConcurrentHashMap<>();
    private final AtomicLong closed = new AtomicLong();

    IdleConsumers(Duration maxIdle) {
        this.maxIdle = maxIdle;
    }

    void accepted(RdmaConnection connection) {
        lastRequestNanos.put(connection, System.nanoTime());
    }

    /** {@code handler}, noting each request as its connection's latest. */
    RequestHandler touching(RequestHandler handler) {
        return (body, context) -> {
            lastRequestNanos.put(context.connection(), System.nanoTime());
            return handler.handle(body, context);
        };
    }

    /** Closes the connections idle for longer than the limit, and forgets closed ones. */
    void closeIdle() {
        long now = System.nanoTime();
        lastRequestNanos.entrySet().removeIf(e -> {
            RdmaConnection c = e.getKey();
            if (!c.isOpen()) {
                return true;
            }
            if (now - e.getValue() < maxIdle.toNanos()) {
                return false;
            }
            LOG.debug("closing the consumer connection from {}: no request for {} ms ({})", c.remoteAddress(),
                    maxIdle.toMillis(), ExporterConfig.CONNECTIONS_MAX_IDLE);
            c.close();
            closed.incrementAndGet();
            return true;
        });
    }

    /** Consumer connections closed as idle so far. */
    long closed() {
        return closed.get();
    }
}
