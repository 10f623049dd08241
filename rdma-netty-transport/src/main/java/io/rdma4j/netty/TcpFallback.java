package io.rdma4j.netty;

import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ProtectedModeException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.TransportConfig;

import java.net.SocketAddress;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The rule by which a client channel reaches a peer that does not run rdma4j over plain TCP
 * ({@link RdmaChannelOption#TCP_FALLBACK}): which failed connects mean such a peer, the default, the log line, and
 * the peers found so, which later connects reach over plain TCP at once for {@link #REMEMBERED}: a server that waits
 * silently for its client to speak first costs rdma4j's connect-timeout once, not on every connection.
 */
final class TcpFallback {

    private static final System.Logger LOG = System.getLogger(TcpFallback.class.getName());
    /** How long a peer found without rdma4j is reached over plain TCP without trying rdma4j first. */
    static final Duration REMEMBERED = Duration.ofMinutes(5);
    /** Peers remembered at most, so memory stays bounded; beyond, each connect tries rdma4j and logs at DEBUG. */
    private static final int MAX_REMEMBERED_PEERS = 4096;
    /** Peer to when it was found without rdma4j ({@code System.nanoTime()}). */
    private static final Map<SocketAddress, Long> WITHOUT_RDMA4J = new ConcurrentHashMap<>();

    private TcpFallback() {
    }

    /** The option as set, else on unless the transport authenticates its peers (plain TCP carries neither). */
    static boolean allowed(RdmaSocketChannelConfig channel, TransportConfig transport) {
        Boolean set = channel.tcpFallback();
        return set != null ? set : transport.sharedSecretValue().isEmpty()
                && "false".equalsIgnoreCase(transport.option("tcp", "tls").orElse("false").trim());
    }

    /**
     * Whether a failed rdma4j connect leaves plain TCP to try: any rdma4j failure to reach the peer (it answered
     * the handshake with something else, closed on it, never answered, or has no listener), never an authentication;
     * or the peer is one found without rdma4j lately ({@link Remembered}).
     */
    static boolean applies(Throwable failure) {
        Throwable cause = RdmaErrors.unwrap(failure);
        return cause instanceof Remembered || cause instanceof RdmaException && !(cause instanceof AuthenticationException)
                && !(cause instanceof ProtectedModeException);
    }

    /** Null, or why connects to {@code peer} go straight to plain TCP: it was found without rdma4j lately. */
    static Remembered remembered(SocketAddress peer) {
        Long since = WITHOUT_RDMA4J.get(peer);
        if (since == null) {
            return null;
        }
        if (System.nanoTime() - since > REMEMBERED.toNanos()) {
            WITHOUT_RDMA4J.remove(peer, since);
            return null;
        }
        return new Remembered(peer);
    }

    /** {@code peer} may run rdma4j now: the next connect to it tries rdma4j first. */
    static void forget(SocketAddress peer) {
        WITHOUT_RDMA4J.remove(peer);
    }

    /** {@code peer} does not run rdma4j: remembered, and said once (while remembered) at INFO. */
    static void found(SocketAddress peer, Throwable failure) {
        Throwable cause = RdmaErrors.unwrap(failure);
        if (cause instanceof Remembered) {
            return;
        }
        boolean first = WITHOUT_RDMA4J.size() < MAX_REMEMBERED_PEERS && WITHOUT_RDMA4J.put(peer, System.nanoTime()) == null;
        LOG.log(first ? System.Logger.Level.INFO : System.Logger.Level.DEBUG, () -> "rdma4j cannot reach " + peer + " ("
                + cause.getMessage() + "); its channels use plain TCP for " + REMEMBERED.toMinutes()
                + " min (RdmaChannelOption.TCP_FALLBACK)");
    }

    /** The connect to a peer found without rdma4j lately skips rdma4j. */
    static final class Remembered extends Exception {
        Remembered(SocketAddress peer) {
            super(peer + " was found without rdma4j in the last " + REMEMBERED.toMinutes() + " min", null, false, false);
        }
    }
}
