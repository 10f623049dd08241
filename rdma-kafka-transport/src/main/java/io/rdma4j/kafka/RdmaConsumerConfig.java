package io.rdma4j.kafka;

import io.rdma4j.core.TransportConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import io.rdma4j.kafka.exporter.ExporterConfig;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * The client properties that switch a consumer to RDMA fetching.
 *
 * <table>
 * <caption>Keys</caption>
 * <tr><td>rdma.fetch.enabled</td><td>{@code true} to fetch by RDMA READ (default false: a plain KafkaConsumer)</td></tr>
 * <tr><td>rdma.exporter.port</td><td>the port every broker's log exporter listens on, at the host the broker
 *   advertises (default 9299): each partition is read from its leader's exporter, or with {@code client.rack} from an
 *   in-sync replica's in that rack</td></tr>
 * <tr><td>rdma.exporter.port.offset</td><td>each broker's exporter listens on the broker's advertised port plus this
 *   (brokers sharing a host each have their own); instead of {@code rdma.exporter.port}</td></tr>
 * <tr><td>rdma.exporter.address</td><td>host:port of one log exporter that serves every partition (a single-broker
 *   set-up); overrides {@code rdma.exporter.port}</td></tr>
 * <tr><td>rdma.exporter.authentication</td><td>{@code delegation-token}: prove to each exporter a delegation token
 *   this consumer creates with its own Kafka client settings, so exporters that check Kafka ACLs
 *   ({@code rdma.exporter.acls}) serve it the topics its principal may READ; {@code none} (default) proves nothing</td></tr>
 * <tr><td>rdma.exporter.token.lifetime.ms</td><td>the most a token lives (default 3600000); a new one replaces it
 *   when four fifths of its life are over. Consumers in one JVM with the same cluster and security settings (one
 *   principal) share one token</td></tr>
 * <tr><td>rdma.exporter.token.linger.ms</td><td>how long the token outlives the last consumer that shares it, for the
 *   next new consumer to prove at once (default 30000); then it is expired. 0: when the last one closes</td></tr>
 * <tr><td>rdma.fetch.fallback.backoff.ms</td><td>how long a partition stays on the normal fetch path after
 *   RDMA could not serve it (default 1000)</td></tr>
 * <tr><td>rdma.fetch.setup.wait.ms</td><td>how long a partition whose exporter connection is being set up (connected
 *   and, with {@code delegation-token}, the token created and proven) is left unfetched for it before Kafka's fetch
 *   serves it meanwhile (default 0: at once, so a new consumer's first records come as soon as a KafkaConsumer's; poll()
 *   never waits for the connection either way)</td></tr>
 * <tr><td>rdma.fetch.connect.early</td><td>{@code true} (default) to connect, at the first poll, to the exporters of
 *   the brokers in {@code bootstrap.servers} (or to {@code rdma.exporter.address}) while the internal KafkaConsumer
 *   fetches metadata and offsets, and to close those no partition is read from once every assigned partition's
 *   exporter is known; {@code false} connects to an exporter only once a partition is located there</td></tr>
 * <tr><td>rdma.fetch.poll.interval.ms</td><td>how often poll() rechecks watermarks while waiting (default 5)</td></tr>
 * <tr><td>rdma.fetch.decode.ahead</td><td>{@code true} (default) to check and inflate the batches read ahead on one
 *   background thread per consumer while the application works; {@code false} does it all on the polling thread</td></tr>
 * <tr><td>rdma.fetch.keepalive.ms</td><td>how often a connection to an exporter that the consumer reads by READ
 *   alone says it is still there (default 60000); keep it below the exporters'
 *   {@code rdma.exporter.connections.max.idle.ms}. A connection to an exporter unused for Kafka's
 *   {@code connections.max.idle.ms} (default 540000) closes, and the next fetch from it connects again</td></tr>
 * <tr><td>rdma.&lt;transport key&gt;</td><td>see {@link TransportConfig#fromProperties}</td></tr>
 * </table>
 * Every {@code rdma.*} key is removed before the rest configures the internal KafkaConsumer.
 */
public record RdmaConsumerConfig(boolean enabled, InetSocketAddress exporterAddress, int exporterPort, String exporterPortOffset,
                                 boolean delegationToken,
                                 Duration tokenLifetime, Duration tokenLinger, Duration fallbackBackoff, Duration pollInterval, boolean decodeAhead,
                                 TransportConfig transport, Duration keepAlive, Duration connectionsMaxIdle, Duration setupWait,
                                 boolean connectEarly) {

    public static final String PREFIX = "rdma.";
    public static final String ENABLED = "rdma.fetch.enabled";
    public static final String EXPORTER_ADDRESS = "rdma.exporter.address";
    public static final String EXPORTER_PORT = "rdma.exporter.port";
    public static final String EXPORTER_PORT_OFFSET = ExporterConfig.PORT_OFFSET;
    /** The exporter's default listen port. */
    public static final int DEFAULT_EXPORTER_PORT = 9299;
    public static final String AUTHENTICATION = "rdma.exporter.authentication";
    public static final String TOKEN_LIFETIME = "rdma.exporter.token.lifetime.ms";
    public static final String TOKEN_LINGER = "rdma.exporter.token.linger.ms";
    public static final String FALLBACK_BACKOFF = "rdma.fetch.fallback.backoff.ms";
    public static final String POLL_INTERVAL = "rdma.fetch.poll.interval.ms";
    public static final String DECODE_AHEAD = "rdma.fetch.decode.ahead";
    public static final String KEEPALIVE = "rdma.fetch.keepalive.ms";
    public static final String SETUP_WAIT = "rdma.fetch.setup.wait.ms";
    public static final String CONNECT_EARLY = "rdma.fetch.connect.early";

    public static boolean enabled(Map<String, ?> configs) {
        Object v = configs.get(ENABLED);
        return v != null && Boolean.parseBoolean(v.toString().trim());
    }

    public static RdmaConsumerConfig from(Map<String, ?> configs) {
        Object address = configs.get(EXPORTER_ADDRESS);
        long port = longValue(configs, EXPORTER_PORT, DEFAULT_EXPORTER_PORT, "a port number");
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException(EXPORTER_PORT + " needs a port number between 1 and 65535, got " + port);
        }
        Object offset = configs.get(EXPORTER_PORT_OFFSET);
        if (offset != null) {
            if (configs.containsKey(EXPORTER_PORT)) {
                throw new IllegalArgumentException("set either " + EXPORTER_PORT + " (one port on every broker's host) or "
                        + EXPORTER_PORT_OFFSET + " (the broker's port plus the offset), not both");
            }
            ExporterConfig.exporterPort(1, offset.toString()); // Checks the offset itself; each broker's port later.
        }
        String authentication = String.valueOf(configs.containsKey(AUTHENTICATION) ? configs.get(AUTHENTICATION) : "none").trim();
        if (!authentication.equals("none") && !authentication.equals("delegation-token")) {
            throw new IllegalArgumentException(AUTHENTICATION + " needs none or delegation-token, got '" + authentication + "'");
        }
        long tokenLifetime = longValue(configs, TOKEN_LIFETIME, 3_600_000, MILLIS);
        if (tokenLifetime < 60_000) {
            throw new IllegalArgumentException(TOKEN_LIFETIME + " needs at least 60000 (a minute), got " + tokenLifetime);
        }
        long tokenLinger = longValue(configs, TOKEN_LINGER, 30_000, MILLIS);
        if (tokenLinger < 0) {
            throw new IllegalArgumentException(TOKEN_LINGER + " cannot be negative, got " + tokenLinger);
        }
        long setupWait = longValue(configs, SETUP_WAIT, 0, MILLIS);
        if (setupWait < 0) {
            throw new IllegalArgumentException(SETUP_WAIT + " cannot be negative, got " + setupWait);
        }
        Map<String, Object> transportKeys = new HashMap<>();
        configs.forEach((k, v) -> {
            if (k.startsWith(PREFIX) && !k.startsWith("rdma.fetch.") && !k.startsWith("rdma.exporter.") && v != null) {
                transportKeys.put(k, v);
            }
        });
        return new RdmaConsumerConfig(enabled(configs), address == null ? null : ExporterConfig.parseAddress(address.toString().trim()),
                (int) port, offset == null ? null : offset.toString().trim(), authentication.equals("delegation-token"), Duration.ofMillis(tokenLifetime),
                Duration.ofMillis(tokenLinger),
                Duration.ofMillis(longValue(configs, FALLBACK_BACKOFF, 1000, MILLIS)),
                Duration.ofMillis(longValue(configs, POLL_INTERVAL, 5, MILLIS)),
                decodeAhead(configs), TransportConfig.fromProperties(transportKeys, PREFIX),
                Duration.ofMillis(positive(configs, KEEPALIVE, 60_000)),
                Duration.ofMillis(positive(configs, ConsumerConfig.CONNECTIONS_MAX_IDLE_MS_CONFIG, 540_000)), Duration.ofMillis(setupWait),
                ExporterConfig.booleanValue(configs, CONNECT_EARLY, true));
    }

    /** The port of the exporter of a broker that clients reach on {@code brokerPort}. */
    public int exporterPortFor(int brokerPort) {
        return exporterPortOffset == null ? exporterPort : ExporterConfig.exporterPort(brokerPort, exporterPortOffset);
    }

    /** The configs without any {@code rdma.*} key: what the internal KafkaConsumer gets. */
    public static Map<String, Object> kafkaConfigs(Map<String, ?> configs) {
        Map<String, Object> out = new HashMap<>();
        configs.forEach((k, v) -> {
            if (!k.startsWith(PREFIX)) {
                out.put(k, v);
            }
        });
        return out;
    }

    /**
     * {@link #DECODE_AHEAD}: {@code true}, {@code false}, or {@code auto} (the default), which decodes ahead only where
     * the JVM has more than two processors. On two, the polling thread decoding each batch just before it converts
     * the records, while the inflated bytes are still in the cache, was measured faster than a decoder thread
     * competing for the same two cores (lz4: 2.8–2.9 GB/s against 2.35–2.46, it/bench-kafka's mixed workload).
     */
    static boolean decodeAhead(Map<String, ?> configs) {
        Object v = configs.get(DECODE_AHEAD);
        if (v == null || v.toString().trim().equalsIgnoreCase("auto")) {
            return Runtime.getRuntime().availableProcessors() > 2;
        }
        String text = v.toString().trim();
        if (!text.equalsIgnoreCase("true") && !text.equalsIgnoreCase("false")) {
            throw new IllegalArgumentException(DECODE_AHEAD + " needs true, false or auto, got '" + v + "'");
        }
        return Boolean.parseBoolean(text);
    }

    private static long positive(Map<String, ?> configs, String key, long fallback) {
        long v = longValue(configs, key, fallback, MILLIS);
        if (v < 1) {
            throw new IllegalArgumentException(key + " must be positive, got " + v);
        }
        return v;
    }

    /** Whether the consumer's configs name a {@code group.id}: commits, and committed offsets to start from. */
    static boolean inGroup(Map<String, Object> configs) {
        Object group = configs.get(ConsumerConfig.GROUP_ID_CONFIG);
        return group != null && !group.toString().isBlank();
    }

    /** A Kafka integer setting of the consumer's configs, or {@code fallback}. */
    static int intValue(Map<String, Object> configs, String key, int fallback) {
        Object v = configs.get(key);
        return v == null ? fallback : Integer.parseInt(v.toString().trim());
    }

    private static final String MILLIS = "a number of milliseconds";

    private static long longValue(Map<String, ?> configs, String key, long fallback, String expected) {
        Object v = configs.get(key);
        try {
            return v == null ? fallback : Long.parseLong(v.toString().trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " needs " + expected + ", got '" + v + "'");
        }
    }
}
