package io.rdma4j.netty;

import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ProtectedModeException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.TransportConfig;

import java.net.SocketAddress;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The rule by which a client channel reaches a peer that does not run rdma4j over plain TCP
 * ({@link RdmaChannelOption#TCP_FALLBACK}): which failed connects mean such a peer, the default, and the log line.
 */
final class TcpFallback {

    private static final System.Logger LOG = System.getLogger(TcpFallback.class.getName());
    /** Peers already named in a log line; beyond this many, fallbacks log at DEBUG, so memory stays bounded. */
    private static final int MAX_REPORTED_PEERS = 4096;
    private static final Set<SocketAddress> REPORTED = ConcurrentHashMap.newKeySet();

    private TcpFallback() {
    }

    /** On unless the transport authenticates its peers: plain TCP would carry neither its secret nor TLS. */
    static boolean byDefault(TransportConfig config) {
        return config.sharedSecretValue().isEmpty() && "false".equalsIgnoreCase(config.option("tcp", "tls").orElse("false").trim());
    }

    /**
     * Whether a failed rdma4j connect leaves plain TCP to try: any rdma4j failure to reach the peer (it answered
     * the handshake with something else, closed on it, never answered, or has no listener), never an authentication.
     */
    static boolean applies(Throwable failure) {
        Throwable cause = RdmaErrors.unwrap(failure);
        return cause instanceof RdmaException && !(cause instanceof AuthenticationException)
                && !(cause instanceof ProtectedModeException);
    }

    static void report(SocketAddress peer, Throwable failure) {
        System.Logger.Level level = REPORTED.size() < MAX_REPORTED_PEERS && REPORTED.add(peer)
                ? System.Logger.Level.INFO : System.Logger.Level.DEBUG;
        LOG.log(level, () -> "rdma4j cannot reach " + peer + " (" + RdmaErrors.unwrap(failure).getMessage()
                + "); its channels use plain TCP (RdmaChannelOption.TCP_FALLBACK)");
    }
}
