package io.rdma4j.core.tcp;

import io.rdma4j.core.TransportConfig;

import java.time.Duration;
import java.util.Locale;
import java.util.Set;

/**
 * The tcp provider's options ({@code tcp.*} keys of {@link TransportConfig}). The bounds keep a responder's
 * memory, connections and threads finite whatever its peers send: beyond the per-connection bounds the
 * connection's reader stops reading the socket, so TCP's own flow control holds the peer back.
 *
 * @param chunkSize                bytes per data frame, so other frames interleave with large transfers
 * @param maxRequestBytes          longest read or write this side serves in one request (and issues)
 * @param regionCloseTimeout       how long deregistering waits for in-flight serves before closing their connections
 * @param maxUnsentResponses       served requests (data, acknowledgements, errors, replies) not yet written to a peer
 * @param maxUnsentResponseBytes   bytes of those responses
 * @param maxInboxBytes            bytes of a peer's two-sided messages the application has not received yet
 * @param maxBufferedBytes         bytes of unreceived messages and unsent responses over all the transport's
 *                                 connections; beyond it the connections that hold more than their share stop reading
 * @param maxConnections           connections per listener, handshakes included
 * @param maxConnectionsPerAddress connections per listener from one remote IP address
 * @param maxHandshakes            accepted connections still in their handshake, per listener; beyond it the oldest
 *                                 is closed to admit a new one (a fraction of maxConnections, so that peers that
 *                                 never finish cannot fill the listener)
 * @param maxHandshakesPerAddress  of those, from one remote IP address
 * @param handshakeTimeout         how long an accepted peer has to complete the handshake
 * @param idleTimeout              a connection on which nothing arrives for this long is closed; each side sends
 *                                 a keep-alive frame after a quarter of it without traffic
 * @param maxRejections            refused requests (unknown keys, out of range, denied) after which the connection
 *                                 is closed, as a verbs queue pair enters the error state
 * @param tls                      TLS settings, or null for plain tcp
 * @param awaitSpinNanos           how long a caller waiting on its own operation ({@code readAndWait}) checks for the
 *                                 answer before it sleeps: waking a sleeping thread costs more than a round trip
 * @param maxRegisteredBytes       bytes the transport's live regions may span together, as {@code RLIMIT_MEMLOCK}
 *                                 bounds what verbs pins: a registration past it is refused
 */
record TcpOptions(int chunkSize, long maxRequestBytes, Duration regionCloseTimeout, int maxUnsentResponses,
                  long maxUnsentResponseBytes, long maxInboxBytes, long maxBufferedBytes, int maxConnections, int maxConnectionsPerAddress,
                  int maxHandshakes, int maxHandshakesPerAddress, Duration handshakeTimeout, Duration idleTimeout, int maxRejections, TcpTls tls,
                  long awaitSpinNanos, long maxRegisteredBytes) {

    static final Set<String> KEYS = Set.of("chunk-size", "max-request-bytes", "region-close-timeout",
            "max-unsent-responses", "max-unsent-response-bytes", "max-inbox-bytes", "max-buffered-bytes", "max-connections",
            "max-connections-per-address", "max-handshakes", "max-handshakes-per-address", "handshake-timeout",
            "idle-timeout", "max-rejections", "tls", "tls.key-store",
            "tls.key-store-password", "tls.trust-store", "tls.trust-store-password", "tls.client-auth", "tls.authentication",
            "await-spin-micros", "max-registered-bytes");

    /** Longer than a loopback or LAN round trip, short enough that a slow answer wastes little CPU. */
    static final long DEFAULT_AWAIT_SPIN_MICROS = 50;

    static TcpOptions from(TransportConfig config) {
        for (String qualified : config.providerOptions().keySet()) {
            if (qualified.startsWith("tcp.") && !KEYS.contains(qualified.substring(4))) {
                throw new IllegalArgumentException("unknown tcp provider option '" + qualified + "'; known: tcp."
                        + String.join(", tcp.", KEYS.stream().sorted().toList()));
            }
        }
        long chunk = bytes(config, "chunk-size", 1L << 20, 4096, TcpFrameCodec.MAX_DATA_CHUNK);
        long maxRequest = bytes(config, "max-request-bytes", 1L << 30, 1, Long.MAX_VALUE);
        Duration closeWait = duration(config, "region-close-timeout", Duration.ofSeconds(5));
        int unsent = (int) count(config, "max-unsent-responses", 1024, 1, 1 << 20);
        long unsentBytes = bytes(config, "max-unsent-response-bytes", 64L << 20, 4096, Long.MAX_VALUE);
        long inbox = bytes(config, "max-inbox-bytes", 4L << 20, config.maxMessageSize(), Long.MAX_VALUE);
        long buffered = bytes(config, "max-buffered-bytes", defaultBufferedBytes(), config.maxMessageSize(), Long.MAX_VALUE);
        int connections = (int) count(config, "max-connections", 4096, 1, 1 << 20);
        int perAddress = (int) count(config, "max-connections-per-address", 256, 1, 1 << 20);
        int handshakes = (int) count(config, "max-handshakes", Math.max(1, connections / 4), 1, connections);
        int handshakesPerAddress = (int) count(config, "max-handshakes-per-address",
                Math.max(1, Math.min(handshakes, perAddress / 4)), 1, Math.min(handshakes, perAddress));
        Duration handshake = duration(config, "handshake-timeout", Duration.ofSeconds(10));
        Duration idle = duration(config, "idle-timeout", Duration.ofSeconds(60));
        if (idle.toMillis() < 100) {
            throw new IllegalArgumentException("tcp.idle-timeout must be at least 100ms, got " + idle);
        }
        int rejections = (int) count(config, "max-rejections", 3, 1, 1 << 20);
        long spinMicros = count(config, "await-spin-micros", DEFAULT_AWAIT_SPIN_MICROS, 0, 1_000_000);
        long registered = bytes(config, "max-registered-bytes", Long.MAX_VALUE, 0, Long.MAX_VALUE);
        return new TcpOptions((int) chunk, maxRequest, closeWait, unsent, unsentBytes, inbox, buffered, connections, perAddress,
                handshakes, handshakesPerAddress, handshake, idle, rejections, TcpTls.from(config).orElse(null), spinMicros * 1000,
                registered);
    }

    /** A quarter of the heap, at most 256 MiB: what peers may make one transport hold stays well inside -Xmx. */
    static long defaultBufferedBytes() {
        return Math.min(256L << 20, Runtime.getRuntime().maxMemory() / 4);
    }

    private static long bytes(TransportConfig config, String key, long fallback, long min, long max) {
        long v = config.option("tcp", key).map(s -> parseBytes("tcp." + key, s)).orElse(fallback);
        return checked(key, v, min, max, " bytes");
    }

    private static long count(TransportConfig config, String key, long fallback, long min, long max) {
        long v = config.option("tcp", key).map(s -> parseBytes("tcp." + key, s)).orElse(fallback);
        return checked(key, v, min, max, "");
    }

    private static long checked(String key, long v, long min, long max, String unit) {
        if (v < min || v > max) {
            throw new IllegalArgumentException("tcp." + key + " must be between " + min + " and " + max + unit
                    + ", got " + v);
        }
        return v;
    }

    private static Duration duration(TransportConfig config, String key, Duration fallback) {
        Duration d = config.option("tcp", key).map(v -> TransportConfig.parseDuration("tcp." + key, v)).orElse(fallback);
        if (d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException("tcp." + key + " must be positive, got " + d);
        }
        return d;
    }

    /** Parses {@code 4096}, {@code 64k}, {@code 1m}, {@code 2g} (binary units). */
    static long parseBytes(String key, String value) {
        String v = value.trim().toLowerCase(Locale.ROOT);
        long unit = 1;
        if (v.endsWith("k") || v.endsWith("m") || v.endsWith("g")) {
            unit = switch (v.charAt(v.length() - 1)) {
                case 'k' -> 1L << 10;
                case 'm' -> 1L << 20;
                default -> 1L << 30;
            };
            v = v.substring(0, v.length() - 1).trim();
        }
        try {
            return Math.multiplyExact(Long.parseLong(v), unit);
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("rdma4j option '" + key + "' needs a byte size like 65536, 64k or 1m, got '"
                    + value + "'");
        }
    }
}
