package io.rdma4j.core.tcp;

import io.rdma4j.core.TransportConfig;

import java.time.Duration;
import java.util.Locale;
import java.util.Set;

/**
 * The tcp provider's options ({@code tcp.*} keys of {@link TransportConfig}).
 *
 * @param chunkSize          bytes per data frame, so other frames interleave with large transfers
 * @param maxRequestBytes    longest read or write this side serves in one request (and issues)
 * @param regionCloseTimeout how long deregistering waits for in-flight serves before closing their connections
 */
record TcpOptions(int chunkSize, long maxRequestBytes, Duration regionCloseTimeout) {

    static final Set<String> KEYS = Set.of("chunk-size", "max-request-bytes", "region-close-timeout");

    static TcpOptions from(TransportConfig config) {
        for (String qualified : config.providerOptions().keySet()) {
            if (qualified.startsWith("tcp.") && !KEYS.contains(qualified.substring(4))) {
                throw new IllegalArgumentException("unknown tcp provider option '" + qualified + "'; known: tcp."
                        + String.join(", tcp.", KEYS.stream().sorted().toList()));
            }
        }
        long chunk = config.option("tcp", "chunk-size").map(v -> parseBytes("tcp.chunk-size", v)).orElse(1L << 20);
        if (chunk < 4096 || chunk > TcpFrameCodec.MAX_DATA_CHUNK) {
            throw new IllegalArgumentException("tcp.chunk-size must be between 4096 and " + TcpFrameCodec.MAX_DATA_CHUNK
                    + " bytes, got " + chunk);
        }
        long maxRequest = config.option("tcp", "max-request-bytes").map(v -> parseBytes("tcp.max-request-bytes", v))
                .orElse(1L << 30);
        if (maxRequest < 1) {
            throw new IllegalArgumentException("tcp.max-request-bytes must be positive, got " + maxRequest);
        }
        Duration closeWait = config.option("tcp", "region-close-timeout")
                .map(v -> TransportConfig.parseDuration("tcp.region-close-timeout", v)).orElse(Duration.ofSeconds(5));
        if (closeWait.isNegative() || closeWait.isZero()) {
            throw new IllegalArgumentException("tcp.region-close-timeout must be positive, got " + closeWait);
        }
        return new TcpOptions((int) chunk, maxRequest, closeWait);
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
