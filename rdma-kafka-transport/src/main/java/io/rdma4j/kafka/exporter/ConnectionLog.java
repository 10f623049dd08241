package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RequestContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * The exporter's one INFO line per consumer connection, none per request. It is written at the connection's first
 * directory request rather than at the accept: by then the consumer has proved its delegation token (where it proves
 * one), so the line can say who it is.
 */
final class ConnectionLog {

    private static final Logger LOG = LoggerFactory.getLogger(LogExporter.class);

    private final Function<RdmaConnection, String> kafkaPrincipal;
    private final Set<RdmaConnection> logged = ConcurrentHashMap.newKeySet();

    /** @param kafkaPrincipal the Kafka principal a connection proved a delegation token of, or null */
    ConnectionLog(Function<RdmaConnection, String> kafkaPrincipal) {
        this.kafkaPrincipal = kafkaPrincipal;
    }

    /** What the listener runs for each accepted connection: logs it at DEBUG, then {@code next}. */
    java.util.function.Consumer<RdmaConnection> accepting(java.util.function.Consumer<RdmaConnection> next) {
        return connection -> {
            LOG.debug("accepted a connection from {} over {}", connection.remoteAddress(), connection.provider());
            next.accept(connection);
        };
    }

    /** A directory request arrived on {@code context}'s connection. */
    void directoryRequested(RequestContext context) {
        if (!logged.add(context.connection())) {
            return;
        }
        String principal = kafkaPrincipal.apply(context.connection());
        String certificate = context.peer().principal().orElse(null);
        String who = principal != null ? "Kafka principal " + principal + (certificate != null ? ", certificate " + certificate : "")
                : certificate != null ? "certificate " + certificate : "no principal proved";
        LOG.info("consumer connection from {} over {} ({})", context.peer().address(), context.peer().provider(), who);
    }

    /** Forgets closed connections. */
    void sweep() {
        logged.removeIf(c -> !c.isOpen());
    }
}
