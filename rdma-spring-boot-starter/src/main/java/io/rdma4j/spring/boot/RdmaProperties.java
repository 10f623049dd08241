package io.rdma4j.spring.boot;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.PoolConfig;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.util.unit.DataSize;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Settings of the rdma4j transport under {@code rdma4j.*}; {@link #toTransportConfig()} and
 * {@link Pool#toPoolConfig()} map them to rdma-core's configs, whose defaults they repeat.
 */
@ConfigurationProperties("rdma4j")
public class RdmaProperties {

    /** Whether to auto-configure the rdma4j transport at all; when false nothing native is touched. */
    private boolean enabled = true;

    /**
     * Whether a transport that cannot open, or an endpoint that cannot listen, fails the application start.
     * When false the application runs without it: health reports UNKNOWN with the reason when the transport
     * is missing, DOWN when the transport is open but the endpoint could not listen.
     */
    private boolean failFast = true;

    /** Provider: "auto" (verbs when a usable RDMA device exists, else tcp), "verbs" or "tcp". */
    private String provider = TransportConfig.AUTO;

    /** Verbs: RDMA device name, e.g. mlx5_0 (empty: the first usable device). */
    private String device;

    /** Verbs: 1-based port number of the device (0: the first active port). */
    private int port = TransportConfig.AUTO_PORT;

    /** Verbs: GID index (-1: chosen from the interface or address, else the first RoCE v2 GID). */
    private int gidIndex = TransportConfig.AUTO_GID_INDEX;

    /** Verbs: network interface whose RoCE GID to use. */
    private String networkInterface;

    /** Verbs: local IP address whose RoCE GID to use. */
    private String address;

    /** How long connecting to a peer may take. */
    private Duration connectTimeout = Duration.ofSeconds(10);

    /** How long one read, write or send may take before the connection is declared dead. */
    private Duration operationTimeout = Duration.ofSeconds(30);

    /** Operations in flight per connection; callers wait (back-pressure) beyond it. */
    private int maxOutstandingOperations = 256;

    /** Largest two-sided message (directory requests and replies travel as such messages); plain numbers are bytes. */
    private DataSize maxMessageSize = DataSize.ofKilobytes(64);

    /** Secret peers must prove knowledge of to connect (tcp and verbs providers); empty: no authentication. */
    private String sharedSecret;

    /**
     * Let an endpoint on a non-loopback address serve peers that prove nothing (no shared secret, no mutual TLS);
     * logged once as a WARN line. Without it such an endpoint fails the start (protected mode).
     */
    private boolean allowUnauthenticated;

    /** Provider-specific options as "provider.key", e.g. tcp.chunk-size. */
    private Map<String, String> options = new LinkedHashMap<>();

    /** The registered buffer pool. */
    private final Pool pool = new Pool();

    /** The listening endpoint peers connect to (needed to publish regions). */
    private final Endpoint endpoint = new Endpoint();

    private final Netty netty = new Netty();

    /** The rdma-core config these properties describe. */
    public TransportConfig toTransportConfig() {
        TransportConfig.Builder b = TransportConfig.builder()
                .provider(provider)
                .device(blankToNull(device))
                .port(port)
                .gidIndex(gidIndex)
                .networkInterface(blankToNull(networkInterface))
                .localAddress(blankToNull(address))
                .connectTimeout(connectTimeout)
                .operationTimeout(operationTimeout)
                .maxOutstandingOperations(maxOutstandingOperations)
                .maxMessageSize(toIntBytes("rdma4j.max-message-size", maxMessageSize))
                .sharedSecret(blankToNull(sharedSecret))
                .allowUnauthenticated(allowUnauthenticated);
        options.forEach((key, value) -> {
            if (key.indexOf('.') <= 0) {
                throw new IllegalArgumentException("rdma4j.options key '" + key
                        + "' must be qualified by its provider, e.g. rdma4j.options.tcp.chunk-size");
            }
            b.providerOption(key, value);
        });
        return b.build();
    }

    static long toBytes(String property, DataSize size) {
        if (size == null || size.isNegative()) {
            throw new IllegalArgumentException(property + " must be a size of at least 0 bytes, e.g. 64KB; got " + size);
        }
        return size.toBytes();
    }

    private static int toIntBytes(String property, DataSize size) {
        long bytes = toBytes(property, size);
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(property + " is " + size + "; use at most " + Integer.MAX_VALUE + " bytes (2GB - 1)");
        }
        return (int) bytes;
    }

    private static String blankToNull(String value) {
        return value == null || value.isBlank() ? null : value.trim();
    }

    public boolean isEnabled() { return enabled; }
    public void setEnabled(boolean enabled) { this.enabled = enabled; }
    public boolean isFailFast() { return failFast; }
    public void setFailFast(boolean failFast) { this.failFast = failFast; }
    public String getProvider() { return provider; }
    public void setProvider(String provider) { this.provider = provider; }
    public String getDevice() { return device; }
    public void setDevice(String device) { this.device = device; }
    public int getPort() { return port; }
    public void setPort(int port) { this.port = port; }
    public int getGidIndex() { return gidIndex; }
    public void setGidIndex(int gidIndex) { this.gidIndex = gidIndex; }
    public String getInterface() { return networkInterface; }
    public void setInterface(String networkInterface) { this.networkInterface = networkInterface; }
    public String getAddress() { return address; }
    public void setAddress(String address) { this.address = address; }
    public Duration getConnectTimeout() { return connectTimeout; }
    public void setConnectTimeout(Duration connectTimeout) { this.connectTimeout = connectTimeout; }
    public Duration getOperationTimeout() { return operationTimeout; }
    public void setOperationTimeout(Duration operationTimeout) { this.operationTimeout = operationTimeout; }
    public int getMaxOutstandingOperations() { return maxOutstandingOperations; }
    public void setMaxOutstandingOperations(int max) { this.maxOutstandingOperations = max; }
    public DataSize getMaxMessageSize() { return maxMessageSize; }
    public void setMaxMessageSize(DataSize maxMessageSize) { this.maxMessageSize = maxMessageSize; }
    public String getSharedSecret() { return sharedSecret; }
    public void setSharedSecret(String sharedSecret) { this.sharedSecret = sharedSecret; }
    public boolean isAllowUnauthenticated() { return allowUnauthenticated; }
    public void setAllowUnauthenticated(boolean allow) { this.allowUnauthenticated = allow; }
    public Map<String, String> getOptions() { return options; }
    public void setOptions(Map<String, String> options) { this.options = options; }
    public Pool getPool() { return pool; }
    public Endpoint getEndpoint() { return endpoint; }
    public Netty getNetty() { return netty; }

    /** Sizes of the registered buffer pool bean. */
    public static class Pool {
        private static final PoolConfig DEFAULTS = PoolConfig.defaults();

        /** Memory registered at once and carved into buffers of one size class (a power of two); plain numbers are bytes. */
        private DataSize slabSize = DataSize.ofBytes(DEFAULTS.slabSize());

        /** Smallest buffer size class (a power of two); plain numbers are bytes. */
        private DataSize minBufferSize = DataSize.ofBytes(DEFAULTS.minBufferSize());

        /** Slab memory the pool may hold; beyond it buffers are registered per use. */
        private DataSize maxPooledBytes = DataSize.ofBytes(DEFAULTS.maxPooledBytes());

        /** Buffers larger than a slab are kept for reuse up to this much memory in total. */
        private DataSize maxCachedLargeBytes = DataSize.ofBytes(DEFAULTS.maxCachedLargeBytes());

        public PoolConfig toPoolConfig() {
            return new PoolConfig(toBytes("rdma4j.pool.slab-size", slabSize), toBytes("rdma4j.pool.min-buffer-size", minBufferSize),
                    toBytes("rdma4j.pool.max-pooled-bytes", maxPooledBytes),
                    toBytes("rdma4j.pool.max-cached-large-bytes", maxCachedLargeBytes), DEFAULTS.access());
        }

        public DataSize getSlabSize() { return slabSize; }
        public void setSlabSize(DataSize slabSize) { this.slabSize = slabSize; }
        public DataSize getMinBufferSize() { return minBufferSize; }
        public void setMinBufferSize(DataSize minBufferSize) { this.minBufferSize = minBufferSize; }
        public DataSize getMaxPooledBytes() { return maxPooledBytes; }
        public void setMaxPooledBytes(DataSize maxPooledBytes) { this.maxPooledBytes = maxPooledBytes; }
        public DataSize getMaxCachedLargeBytes() { return maxCachedLargeBytes; }
        public void setMaxCachedLargeBytes(DataSize maxCachedLargeBytes) { this.maxCachedLargeBytes = maxCachedLargeBytes; }
    }

    /** The listening endpoint: peers connect to it to look up and read published regions. */
    public static class Endpoint {

        /** Whether to listen for peers. Publishing regions for others to read needs it. */
        private boolean enabled = false;

        /** Address to listen on; the loopback default keeps the endpoint local until you choose an interface peers reach. */
        private String address = "127.0.0.1";

        /** Port to listen on (0: a free port, see RdmaEndpoint#localAddress()). */
        private int port = 0;

        public boolean isEnabled() { return enabled; }
        public void setEnabled(boolean enabled) { this.enabled = enabled; }
        public String getAddress() { return address; }
        public void setAddress(String address) { this.address = address; }
        public int getPort() { return port; }
        public void setPort(int port) { this.port = port; }
    }

    /** Reactor Netty (WebFlux's server, WebClient) on rdma4j's Netty transport. */
    public static class Netty {
        /** Serve and connect Reactor Netty through the transport's channels (needs rdma-netty-transport and Reactor Netty). */
        private boolean enabled = false;

        /** Event loop threads for Reactor Netty's channels; 0 is Netty's default (twice the cores). */
        private int eventLoopThreads = 0;

        public boolean isEnabled() { return enabled; }
        public void setEnabled(boolean enabled) { this.enabled = enabled; }
        public int getEventLoopThreads() { return eventLoopThreads; }
        public void setEventLoopThreads(int eventLoopThreads) { this.eventLoopThreads = eventLoopThreads; }
    }
}
