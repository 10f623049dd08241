package io.rdma4j.core;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * Everything {@link RdmaTransport#open(TransportConfig)} needs. Build it with {@link #builder()}, or from
 * flat properties with {@link #fromProperties(Map, String)} (what the Spark, Kafka and Spring
 * integrations do with their own prefixes).
 *
 * <table>
 * <caption>Property keys (after the prefix)</caption>
 * <tr><th>key</th><th>default</th><th>meaning</th></tr>
 * <tr><td>provider</td><td>auto</td><td>{@code auto} (verbs when a usable device exists, else tcp), {@code verbs} or {@code tcp}</td></tr>
 * <tr><td>device</td><td>(auto)</td><td>verbs: RDMA device name, e.g. {@code mlx5_0}</td></tr>
 * <tr><td>port</td><td>(auto)</td><td>verbs: port number (1-based)</td></tr>
 * <tr><td>gid-index</td><td>(auto)</td><td>verbs: GID index</td></tr>
 * <tr><td>interface</td><td>(none)</td><td>verbs: network interface whose RoCE GID to use</td></tr>
 * <tr><td>address</td><td>(none)</td><td>verbs: local IP address whose RoCE GID to use</td></tr>
 * <tr><td>connect-timeout</td><td>10s</td><td>how long a connect may take</td></tr>
 * <tr><td>operation-timeout</td><td>30s</td><td>how long one read/write/send may take before the connection is declared dead</td></tr>
 * <tr><td>max-outstanding-operations</td><td>256</td><td>per connection; callers wait (back-pressure) beyond it</td></tr>
 * <tr><td>max-message-size</td><td>65536</td><td>largest two-sided message</td></tr>
 * <tr><td>shared-secret</td><td>(none)</td><td>peers must prove knowledge of it to connect (tcp and verbs: HMAC-SHA256 over both sides' nonces, the connecting side proves first); at least 16 bytes, a shorter or empty one fails at open</td></tr>
 * <tr><td>allow-unauthenticated</td><td>false</td><td>{@code true} lets a listener on a non-loopback address serve peers
 *   that prove nothing (no shared secret, no mutual TLS), with one WARN line per transport; otherwise such a listener
 *   refuses to open ({@link ProtectedModeException}). Loopback listeners serve only this host and need neither.</td></tr>
 * <tr><td>&lt;provider&gt;.*</td><td></td><td>provider-specific options, e.g. {@code tcp.chunk-size}</td></tr>
 * </table>
 */
public record TransportConfig(
        String provider,
        String device,
        int port,
        int gidIndex,
        String networkInterface,
        String localAddress,
        Duration connectTimeout,
        Duration operationTimeout,
        int maxOutstandingOperations,
        int maxMessageSize,
        String sharedSecret,
        boolean allowUnauthenticated,
        Map<String, String> providerOptions) {

    public static final String AUTO = "auto";
    public static final int AUTO_PORT = 0;
    public static final int AUTO_GID_INDEX = -1;

    public TransportConfig {
        provider = Objects.requireNonNullElse(provider, AUTO).trim().toLowerCase(Locale.ROOT);
        Objects.requireNonNull(connectTimeout, "connectTimeout");
        Objects.requireNonNull(operationTimeout, "operationTimeout");
        if (connectTimeout.isNegative() || connectTimeout.isZero() || operationTimeout.isNegative() || operationTimeout.isZero()) {
            throw new IllegalArgumentException("timeouts must be positive");
        }
        if (maxOutstandingOperations < 1) {
            throw new IllegalArgumentException("max-outstanding-operations must be at least 1, got " + maxOutstandingOperations);
        }
        if (maxMessageSize < 64) {
            throw new IllegalArgumentException("max-message-size must be at least 64 bytes, got " + maxMessageSize);
        }
        if (port < 0) {
            throw new IllegalArgumentException("port must be 1-based (0 = auto), got " + port);
        }
        providerOptions = Map.copyOf(providerOptions);
    }

    /** The defaults: auto provider, 10 s connect, 30 s operations, 256 outstanding, 64 KiB messages. */
    public static TransportConfig defaults() {
        return builder().build();
    }

    public static Builder builder() {
        return new Builder();
    }

    public Builder toBuilder() {
        return new Builder(this);
    }

    public Optional<String> sharedSecretValue() {
        return Optional.ofNullable(sharedSecret).filter(s -> !s.isEmpty());
    }

    /** A provider-specific option, e.g. {@code option("tcp", "chunk-size")}. */
    public Optional<String> option(String providerName, String key) {
        return Optional.ofNullable(providerOptions.get(providerName + "." + key));
    }

    @Override
    public String toString() {
        // Never print the secret.
        return "TransportConfig[provider=" + provider + ", device=" + device + ", port=" + port + ", gidIndex=" + gidIndex
                + ", interface=" + networkInterface + ", address=" + localAddress + ", connectTimeout=" + connectTimeout
                + ", operationTimeout=" + operationTimeout + ", maxOutstanding=" + maxOutstandingOperations
                + ", maxMessageSize=" + maxMessageSize + ", sharedSecret=" + (sharedSecret == null ? "none" : "***")
                + ", allowUnauthenticated=" + allowUnauthenticated
                + ", options=" + providerOptions.keySet() + "]";
    }

    /**
     * Reads a config from flat properties: every key that starts with {@code prefix} (e.g.
     * {@code "spark.shuffle.rdma."}) is taken, the rest ignored. Unknown keys under the prefix that are
     * not provider options are rejected, so typos fail loudly.
     */
    public static TransportConfig fromProperties(Map<?, ?> properties, String prefix) {
        Builder b = builder();
        for (Map.Entry<?, ?> e : properties.entrySet()) {
            if (!(e.getKey() instanceof String fullKey) || !fullKey.startsWith(prefix) || e.getValue() == null) {
                continue;
            }
            String key = fullKey.substring(prefix.length());
            String value = e.getValue().toString().trim();
            switch (key) {
                case "provider" -> b.provider(value);
                case "device" -> b.device(value.isEmpty() ? null : value);
                case "port" -> b.port(parseInt(key, value));
                case "gid-index" -> b.gidIndex(parseInt(key, value));
                case "interface" -> b.networkInterface(value.isEmpty() ? null : value);
                case "address" -> b.localAddress(value.isEmpty() ? null : value);
                case "connect-timeout" -> b.connectTimeout(parseDuration(key, value));
                case "operation-timeout" -> b.operationTimeout(parseDuration(key, value));
                case "max-outstanding-operations" -> b.maxOutstandingOperations(parseInt(key, value));
                case "max-message-size" -> b.maxMessageSize(parseInt(key, value));
                case "shared-secret" -> b.sharedSecret(value);
                case "allow-unauthenticated" -> b.allowUnauthenticated(parseBoolean(key, value));
                default -> {
                    if (key.indexOf('.') > 0) {
                        b.providerOption(key, value);
                    }
                    // Other keys under the prefix belong to the integration (e.g. its buffer sizes).
                }
            }
        }
        return b.build();
    }

    private static boolean parseBoolean(String key, String value) {
        if (!value.equalsIgnoreCase("true") && !value.equalsIgnoreCase("false")) {
            throw new IllegalArgumentException("rdma4j option '" + key + "' must be true or false, got '" + value + "'");
        }
        return Boolean.parseBoolean(value);
    }

    private static int parseInt(String key, String value) {
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("rdma4j option '" + key + "' needs an integer, got '" + value + "'");
        }
    }

    /** Parses {@code 500ms}, {@code 10s}, {@code 2m}, {@code 1h}, ISO-8601 ({@code PT10S}) or plain milliseconds. */
    public static Duration parseDuration(String key, String value) {
        String v = value.trim().toLowerCase(Locale.ROOT);
        try {
            if (v.startsWith("pt")) {
                return Duration.parse(v.toUpperCase(Locale.ROOT));
            }
            if (v.endsWith("ms")) {
                return Duration.ofMillis(Long.parseLong(v.substring(0, v.length() - 2).trim()));
            }
            if (v.endsWith("s")) {
                return Duration.ofSeconds(Long.parseLong(v.substring(0, v.length() - 1).trim()));
            }
            if (v.endsWith("m")) {
                return Duration.ofMinutes(Long.parseLong(v.substring(0, v.length() - 1).trim()));
            }
            if (v.endsWith("h")) {
                return Duration.ofHours(Long.parseLong(v.substring(0, v.length() - 1).trim()));
            }
            return Duration.ofMillis(Long.parseLong(v));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("rdma4j option '" + key + "' needs a duration like 500ms, 10s or 2m, got '" + value + "'");
        }
    }

    /** Builder with the documented defaults. */
    public static final class Builder {
        private String provider = AUTO;
        private String device;
        private int port = AUTO_PORT;
        private int gidIndex = AUTO_GID_INDEX;
        private String networkInterface;
        private String localAddress;
        private Duration connectTimeout = Duration.ofSeconds(10);
        private Duration operationTimeout = Duration.ofSeconds(30);
        private int maxOutstandingOperations = 256;
        private int maxMessageSize = 64 * 1024;
        private String sharedSecret;
        private boolean allowUnauthenticated;
        private final Map<String, String> providerOptions = new LinkedHashMap<>();

        private Builder() {
        }

        private Builder(TransportConfig c) {
            provider = c.provider;
            device = c.device;
            port = c.port;
            gidIndex = c.gidIndex;
            networkInterface = c.networkInterface;
            localAddress = c.localAddress;
            connectTimeout = c.connectTimeout;
            operationTimeout = c.operationTimeout;
            maxOutstandingOperations = c.maxOutstandingOperations;
            maxMessageSize = c.maxMessageSize;
            sharedSecret = c.sharedSecret;
            allowUnauthenticated = c.allowUnauthenticated;
            providerOptions.putAll(c.providerOptions);
        }

        public Builder provider(String provider) { this.provider = provider; return this; }
        public Builder device(String device) { this.device = device; return this; }
        public Builder port(int port) { this.port = port; return this; }
        public Builder gidIndex(int gidIndex) { this.gidIndex = gidIndex; return this; }
        public Builder networkInterface(String networkInterface) { this.networkInterface = networkInterface; return this; }
        public Builder localAddress(String localAddress) { this.localAddress = localAddress; return this; }
        public Builder connectTimeout(Duration connectTimeout) { this.connectTimeout = connectTimeout; return this; }
        public Builder operationTimeout(Duration operationTimeout) { this.operationTimeout = operationTimeout; return this; }
        public Builder maxOutstandingOperations(int max) { this.maxOutstandingOperations = max; return this; }
        public Builder maxMessageSize(int maxMessageSize) { this.maxMessageSize = maxMessageSize; return this; }
        public Builder sharedSecret(String sharedSecret) { this.sharedSecret = sharedSecret; return this; }
        /** Serve unauthenticated peers off loopback too (see {@link ProtectedModeException}). */
        public Builder allowUnauthenticated(boolean allow) { this.allowUnauthenticated = allow; return this; }
        /** A provider option as {@code "<provider>.<key>"}, e.g. {@code "tcp.chunk-size"}. */
        public Builder providerOption(String qualifiedKey, String value) { providerOptions.put(qualifiedKey, value); return this; }

        public TransportConfig build() {
            return new TransportConfig(provider, device, port, gidIndex, networkInterface, localAddress, connectTimeout,
                    operationTimeout, maxOutstandingOperations, maxMessageSize, sharedSecret, allowUnauthenticated, providerOptions);
        }
    }
}
