package io.rdma4j.kafka.exporter;

import io.rdma4j.core.TransportConfig;
import org.apache.kafka.clients.CommonClientConfigs;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * What the log exporter needs: the broker's log directories and bootstrap address, where to listen,
 * how fresh the watermarks are, and the rdma4j transport settings ({@code rdma.*} keys).
 *
 * <table>
 * <caption>Keys</caption>
 * <tr><td>rdma.exporter.log.dirs</td><td>the broker's {@code log.dirs} (comma-separated)</td></tr>
 * <tr><td>rdma.exporter.bootstrap.servers</td><td>the broker's address, for the Admin API</td></tr>
 * <tr><td>rdma.exporter.listen.address</td><td>host:port consumers connect to (default 127.0.0.1:9299)</td></tr>
 * <tr><td>rdma.exporter.watermark.interval.ms</td><td>how often watermarks are refreshed (default 50; more than 1000 is lowered to 1000, with a warning)</td></tr>
 * <tr><td>rdma.exporter.retire.grace.ms</td><td>how long a replaced region stays readable (default 5000)</td></tr>
 * <tr><td>rdma.exporter.internal.topics</td><td>{@code true} to export Kafka's internal topics too (names starting
 *   with {@code __}: {@code __consumer_offsets}, {@code __transaction_state}, ...; default false)</td></tr>
 * <tr><td>rdma.exporter.port.offset</td><td>listen on the broker's port plus this (0 to 65535), at the host of
 *   {@code rdma.exporter.listen.address} (given without a port) or 127.0.0.1: one exporter per broker where brokers
 *   share a host; the sidecar counts from the port of {@code rdma.exporter.bootstrap.servers}, the plugin from the
 *   broker's first advertised client listener</td></tr>
 * <tr><td>rdma.exporter.acls</td><td>{@code true}: serve a topic only to consumers whose Kafka principal has READ
 *   on it, as the cluster's authorizer decides (consumers prove a delegation token; see {@link TopicReadAuthorizer});
 *   {@code auto} (default): {@code true} when the cluster has an authorizer ({@link AclMode}); {@code false}: serve
 *   every exported topic</td></tr>
 * <tr><td>rdma.exporter.connections.max.idle.ms</td><td>a consumer connection without a request for this long is
 *   closed (default 600000, as the broker's {@code connections.max.idle.ms}); consumers reading by READ alone send a
 *   keepalive every {@code rdma.fetch.keepalive.ms}, which must be shorter</td></tr>
 * <tr><td>rdma.exporter.acl.cache.ms</td><td>how long a decision per principal (a delegation token's owner) and topic is kept, and how often a consumer connection's token is looked up again (default 30000)</td></tr>
 * <tr><td>rdma.exporter.token.mechanism</td><td>the SCRAM mechanism delegation tokens authenticate with
 *   (default SCRAM-SHA-512)</td></tr>
 * <tr><td>rdma.exporter.admin.*</td><td>extra Admin client settings (security etc.)</td></tr>
 * <tr><td>rdma.&lt;transport key&gt;</td><td>see {@link TransportConfig#fromProperties}</td></tr>
 * </table>
 */
public record ExporterConfig(List<Path> logDirs, String bootstrapServers, InetSocketAddress listenAddress,
                             Duration watermarkInterval, Duration retireGrace, boolean exportInternalTopics,
                             AclMode acls, Duration aclCache, String tokenMechanism,
                             Map<String, Object> adminProperties, TransportConfig transport, Duration connectionsMaxIdle) {

    public static final String PREFIX = "rdma.exporter.";
    public static final String LOG_DIRS = PREFIX + "log.dirs";
    public static final String BOOTSTRAP = PREFIX + "bootstrap.servers";
    public static final String LISTEN = PREFIX + "listen.address";
    public static final String PORT_OFFSET = PREFIX + "port.offset";
    public static final String INTERVAL = PREFIX + "watermark.interval.ms";
    /** The longest watermark interval: consumers take a watermark unchanged for 10 s for an exporter that stopped. */
    static final long MAX_WATERMARK_INTERVAL_MS = 1000;
    public static final String GRACE = PREFIX + "retire.grace.ms";
    public static final String INTERNAL_TOPICS = PREFIX + "internal.topics";
    public static final String ACLS = PREFIX + "acls";
    public static final String ACL_CACHE = PREFIX + "acl.cache.ms";
    public static final String TOKEN_MECHANISM = PREFIX + "token.mechanism";
    public static final String CONNECTIONS_MAX_IDLE = PREFIX + "connections.max.idle.ms";
    public static final String ADMIN_PREFIX = PREFIX + "admin.";
    /** Every {@code rdma.exporter.*} key besides those under {@link #ADMIN_PREFIX}. */
    public static final java.util.Set<String> KEYS = java.util.Set.of(LOG_DIRS, BOOTSTRAP, LISTEN, PORT_OFFSET, INTERVAL, GRACE,
            INTERNAL_TOPICS, ACLS, ACL_CACHE, TOKEN_MECHANISM, CONNECTIONS_MAX_IDLE);

    public ExporterConfig {
        if (logDirs.isEmpty()) {
            throw new IllegalArgumentException("set " + LOG_DIRS + " to the broker's log.dirs");
        }
        if (bootstrapServers == null || bootstrapServers.isBlank()) {
            throw new IllegalArgumentException("set " + BOOTSTRAP + " to the broker's listener, e.g. 127.0.0.1:9092");
        }
        if (watermarkInterval.isNegative() || watermarkInterval.isZero()) {
            throw new IllegalArgumentException(INTERVAL + " must be positive, got " + watermarkInterval.toMillis());
        }
        if (watermarkInterval.toMillis() > MAX_WATERMARK_INTERVAL_MS) {
            // consumers take a watermark unchanged for 10 s for an exporter that stopped (SegmentLocator.WATERMARK_STALE);
            // lowered rather than refused, so that a broker whose plugin was configured so still starts
            org.slf4j.LoggerFactory.getLogger(ExporterConfig.class).warn("{}={} is more than {} ms: the exporter refreshes "
                    + "watermarks every {} ms", INTERVAL, watermarkInterval.toMillis(), MAX_WATERMARK_INTERVAL_MS, MAX_WATERMARK_INTERVAL_MS);
            watermarkInterval = Duration.ofMillis(MAX_WATERMARK_INTERVAL_MS);
        }
        if (connectionsMaxIdle.isNegative() || connectionsMaxIdle.isZero()) {
            throw new IllegalArgumentException(CONNECTIONS_MAX_IDLE + " must be positive");
        }
        if (acls == AclMode.ON && !adminOnSasl(adminProperties)) {
            throw new IllegalArgumentException(ACLS + "=true " + cannotCheck(adminProperties, tokenMechanism));
        }
        logDirs = List.copyOf(logDirs);
        adminProperties = Map.copyOf(adminProperties);
    }

    /** Whether the Admin client can take consumers' delegation tokens: they authenticate with SCRAM, which only SASL listeners take. */
    boolean adminOnSasl() {
        return adminOnSasl(adminProperties);
    }

    /** Why this exporter cannot check ACLs, and what to set: the end of a message that starts with what needs them. */
    String cannotCheck() {
        return cannotCheck(adminProperties, tokenMechanism);
    }

    private static boolean adminOnSasl(Map<String, Object> admin) {
        return protocol(admin).toUpperCase(java.util.Locale.ROOT).startsWith("SASL_");
    }

    private static String protocol(Map<String, Object> admin) {
        return String.valueOf(admin.getOrDefault(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "PLAINTEXT")).trim();
    }

    private static String cannotCheck(Map<String, Object> admin, String tokenMechanism) {
        return "needs the exporter's Admin client on a SASL listener with " + tokenMechanism + " enabled: set "
                + ADMIN_PREFIX + "security.protocol=SASL_SSL or SASL_PLAINTEXT and the matching " + ADMIN_PREFIX
                + "sasl.* keys, or " + ACLS + "=false to serve every exported topic to any peer the rdma4j transport lets "
                + "connect; the security protocol is " + protocol(admin);
    }

    public static ExporterConfig fromProperties(Map<String, ?> props) {
        String dirs = string(props, LOG_DIRS, "");
        List<Path> logDirs = Arrays.stream(dirs.split(",")).map(String::trim).filter(s -> !s.isEmpty()).map(Path::of).toList();
        Map<String, Object> admin = new HashMap<>();
        Map<String, Object> transportProps = new HashMap<>();
        props.forEach((k, v) -> {
            if (k.startsWith(ADMIN_PREFIX)) {
                admin.put(k.substring(ADMIN_PREFIX.length()), v);
            } else if (k.startsWith("rdma.") && !k.startsWith(PREFIX) && v != null) {
                transportProps.put(k, v);
            }
        });
        String bootstrap = string(props, BOOTSTRAP, null);
        return new ExporterConfig(logDirs, bootstrap, listenAddress(props, bootstrap),
                millis(props, INTERVAL, "50"), millis(props, GRACE, "5000"), booleanValue(props, INTERNAL_TOPICS, false),
                AclMode.parse(ACLS, string(props, ACLS, "auto")), millis(props, ACL_CACHE, "30000"),
                string(props, TOKEN_MECHANISM, "SCRAM-SHA-512"), admin,
                TransportConfig.fromProperties(transportProps, "rdma."), millis(props, CONNECTIONS_MAX_IDLE, "600000"));
    }

    public static ExporterConfig fromProperties(Properties props) {
        Map<String, Object> map = new HashMap<>();
        props.stringPropertyNames().forEach(k -> map.put(k, props.getProperty(k)));
        return fromProperties(map);
    }

    /**
     * {@code rdma.exporter.listen.address}, or with {@code rdma.exporter.port.offset} its host (default 127.0.0.1) and
     * the port of the first bootstrap server plus the offset.
     */
    private static InetSocketAddress listenAddress(Map<String, ?> props, String bootstrap) {
        String listen = string(props, LISTEN, null);
        String offset = string(props, PORT_OFFSET, null);
        if (offset == null) {
            return parseAddress(listen == null ? "127.0.0.1:9299" : listen);
        }
        if (listen != null && listen.contains(":")) {
            throw new IllegalArgumentException("set either " + PORT_OFFSET + " or a port in " + LISTEN + " (then give it "
                    + "the host alone), not both; got " + LISTEN + "=" + listen);
        }
        if (bootstrap == null || bootstrap.isBlank()) {
            throw new IllegalArgumentException("set " + BOOTSTRAP + " to the broker's listener, e.g. 127.0.0.1:9092");
        }
        int brokerPort = parseAddress(bootstrap.split(",")[0].trim()).getPort();
        return new InetSocketAddress(listen == null ? "127.0.0.1" : listen, exporterPort(brokerPort, offset));
    }

    /**
     * A broker's exporter port under {@code rdma.exporter.port.offset} (consumers and exporters share this rule).
     *
     * @throws IllegalArgumentException when the offset is not a number from 0 to 65535 or the sum is not a port
     */
    public static int exporterPort(int brokerPort, String offset) {
        int off;
        try {
            off = Integer.parseInt(offset.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(PORT_OFFSET + " needs a number from 0 to 65535, got '" + offset + "'");
        }
        if (off < 0 || off > 65535) {
            throw new IllegalArgumentException(PORT_OFFSET + " needs a number from 0 to 65535, got " + off);
        }
        if (brokerPort + off > 65535 || brokerPort <= 0) {
            throw new IllegalArgumentException(PORT_OFFSET + "=" + off + " on broker port " + brokerPort + " gives no port"
                    + " (1 to 65535): choose a smaller offset");
        }
        return brokerPort + off;
    }

    /** Parses {@code host:port}; the message says the expected form. */
    public static InetSocketAddress parseAddress(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException("expected host:port, got '" + hostPort + "'");
        }
        try {
            return new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("expected host:port with a numeric port, got '" + hostPort + "'");
        }
    }

    private static Duration millis(Map<String, ?> props, String key, String fallback) {
        String v = string(props, key, fallback);
        try {
            return Duration.ofMillis(Long.parseLong(v));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " needs a number of milliseconds, got '" + v + "'");
        }
    }

    /** The {@code true} or {@code false} under {@code key} (either case, trimmed), or {@code fallback}; for consumers' keys too. */
    public static boolean booleanValue(Map<String, ?> props, String key, boolean fallback) {
        String v = string(props, key, Boolean.toString(fallback));
        if (!v.equalsIgnoreCase("true") && !v.equalsIgnoreCase("false")) {
            throw new IllegalArgumentException(key + " must be true or false, got '" + v + "'");
        }
        return Boolean.parseBoolean(v);
    }

    /**
     * Kafka's internal topics: consumer offsets, transaction state, share group state and the like, whose records
     * belong to the cluster, not to an application. Kafka names them all with a leading {@code __}.
     */
    public static boolean isInternalTopic(String topic) {
        return topic.startsWith("__");
    }

    private static String string(Map<String, ?> props, String key, String fallback) {
        Object v = props.get(key);
        return v == null ? fallback : v.toString().trim();
    }
}
