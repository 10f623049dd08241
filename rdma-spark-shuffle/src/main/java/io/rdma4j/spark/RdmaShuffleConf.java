package io.rdma4j.spark;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.Access;
import org.apache.spark.SparkConf;
import org.apache.spark.network.util.JavaUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Tuple2;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Options of {@link RdmaShuffleManager}, all under {@code spark.shuffle.rdma.}, in Spark's camelCase. rdma-core's
 * kebab-case names ({@code max-bytes-in-flight}) are accepted as deprecated aliases, with one warning each; keys
 * nobody knows get one warning listing them and the known keys.
 *
 * <table>
 * <caption>spark.shuffle.rdma.*</caption>
 * <tr><th>key</th><th>default</th><th>meaning</th></tr>
 * <tr><td>provider</td><td>auto</td><td>rdma4j provider: {@code auto}, {@code verbs} or {@code tcp}</td></tr>
 * <tr><td>device, port, gidIndex, interface</td><td>(auto)</td><td>verbs device selection overrides</td></tr>
 * <tr><td>address</td><td>(block manager host)</td><td>IP address the executor's rdma4j endpoint listens on; for verbs
 *     also the address whose RoCE GID is used</td></tr>
 * <tr><td>connectTimeout, operationTimeout, maxOutstandingOperations, maxMessageSize, sharedSecret, tcp.*, verbs.*</td>
 *     <td>see TransportConfig</td><td>passed to the rdma4j transport</td></tr>
 * <tr><td>maxBytesInFlight</td><td>spark.reducer.maxSizeInFlight (48m)</td><td>remote bytes a reducer has requested
 *     and not yet consumed</td></tr>
 * <tr><td>bufferSlabSize</td><td>4m</td><td>registered slab size of the reducer buffer pool (power of two)</td></tr>
 * <tr><td>bufferPoolMaxBytes</td><td>256m</td><td>registered memory the pool keeps per executor</td></tr>
 * <tr><td>fallback</td><td>spark</td><td>a peer not reachable by RDMA: {@code spark} (Spark's own block transfer) or {@code fail}</td></tr>
 * <tr><td>connectionIdleTimeout</td><td>spark.shuffle.io.connectionTimeout (spark.network.timeout, 120s)</td><td>a
 *     connection to a peer executor that no reducer used for this long is closed; the next fetch reconnects</td></tr>
 * <tr><td>registration</td><td>lazy</td><td>{@code lazy}: map outputs are mapped and registered on the first reducer request;
 *     {@code eager}: when the map task commits</td></tr>
 * </table>
 */
public record RdmaShuffleConf(
        TransportConfig transport,
        long maxBytesInFlight,
        long bufferSlabSize,
        long bufferPoolMaxBytes,
        Fallback fallback,
        boolean eagerRegistration,
        boolean checksumEnabled,
        String checksumAlgorithm,
        boolean readHostLocalDisk,
        Duration connectionIdleTimeout) {

    public static final String PREFIX = "spark.shuffle.rdma.";
    /** Spark's own in-flight bound, the default of {@code maxBytesInFlight}. */
    static final String SPARK_MAX_SIZE_IN_FLIGHT = "spark.reducer.maxSizeInFlight";
    /** Spark's switch for reading the map outputs of executors on the same host from their files. */
    public static final String SPARK_READ_HOST_LOCAL_DISK = "spark.shuffle.readHostLocalDisk";
    /** Spark's idle timeout of its shuffle client's connections, the default of {@code connectionIdleTimeout}. */
    static final String SPARK_CONNECTION_TIMEOUT = "spark.shuffle.io.connectionTimeout";

    /** Every key under {@link #PREFIX}, as users write them. */
    static final List<String> KEYS = List.of(
            "provider", "device", "port", "gidIndex", "interface", "address",
            "connectTimeout", "operationTimeout", "maxOutstandingOperations", "maxMessageSize", "sharedSecret",
            "maxBytesInFlight", "bufferSlabSize", "bufferPoolMaxBytes", "fallback", "registration", "connectionIdleTimeout",
            "tcp.chunkSize", "tcp.maxRequestBytes", "tcp.regionCloseTimeout", "tcp.maxUnsentResponses",
            "tcp.maxUnsentResponseBytes", "tcp.maxInboxBytes", "tcp.maxBufferedBytes", "tcp.maxConnections",
            "tcp.maxConnectionsPerAddress", "tcp.maxHandshakes", "tcp.maxHandshakesPerAddress",
            "tcp.handshakeTimeout", "tcp.idleTimeout", "tcp.maxRejections", "tcp.tls", "tcp.tls.keyStore",
            "tcp.tls.keyStorePassword", "tcp.tls.trustStore", "tcp.tls.trustStorePassword", "tcp.tls.clientAuth",
            "tcp.tls.authentication", "tcp.awaitSpinMicros", "tcp.maxRegisteredBytes", "verbs.receiveDepth", "verbs.busyPoll", "verbs.awaitSpinMicros");

    private static final Logger LOG = LoggerFactory.getLogger(RdmaShuffleConf.class);
    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();
    private static final Pattern UPPER = Pattern.compile("[A-Z]");
    private static final Pattern DASHED = Pattern.compile("-([a-z0-9])");
    /** rdma-core's names of the keys whose Spark names differ, longest first (so that no name rewrites part of another). */
    private static final List<String> KEBAB_NAMES = KEYS.stream().map(RdmaShuffleConf::kebab).filter(k -> k.contains("-"))
            .sorted(Comparator.comparingInt(String::length).reversed()).toList();

    /** What a reducer does when a peer cannot be reached by RDMA. */
    public enum Fallback { SPARK, FAIL }

    public static RdmaShuffleConf from(SparkConf conf) {
        return from(conf, RdmaShuffleConf::warnOnce);
    }

    /** As {@link #from(SparkConf)}, handing deprecation and unknown-key warnings to {@code warnings}. */
    static RdmaShuffleConf from(SparkConf conf, Consumer<String> warnings) {
        Map<String, String> options = sparkNamed(conf, warnings);
        Map<String, String> core = new HashMap<>();
        // Unknown keys go on too: an unknown provider option still fails when that provider opens, as in rdma-core.
        options.forEach((key, value) -> core.put(PREFIX + kebab(key), value));
        TransportConfig transport;
        try {
            transport = TransportConfig.fromProperties(core, PREFIX);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(sparkNames(e.getMessage()), e);
        }
        String fallback = options.getOrDefault("fallback", "spark").trim().toUpperCase(Locale.ROOT);
        Fallback fb;
        try {
            fb = Fallback.valueOf(fallback);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(PREFIX + "fallback must be 'spark' or 'fail', got '" + fallback.toLowerCase(Locale.ROOT) + "'");
        }
        String registration = options.getOrDefault("registration", "lazy").trim().toLowerCase(Locale.ROOT);
        if (!registration.equals("lazy") && !registration.equals("eager")) {
            throw new IllegalArgumentException(PREFIX + "registration must be 'lazy' or 'eager', got '" + registration + "'");
        }
        long slab = bytes(options, "bufferSlabSize", "4m");
        if (Long.bitCount(slab) != 1 || slab < 4096) {
            throw new IllegalArgumentException(PREFIX + "bufferSlabSize must be a power of two of at least 4k, got " + slab);
        }
        long inFlight;
        String inFlightKey;
        if (options.containsKey("maxBytesInFlight")) {
            inFlight = bytes(options, "maxBytesInFlight", null);
            inFlightKey = PREFIX + "maxBytesInFlight";
        } else {
            // Spark reads a plain number here as MiB, and so do we: the same setting bounds both shuffles alike.
            inFlight = conf.getSizeAsMb(SPARK_MAX_SIZE_IN_FLIGHT, "48m") << 20;
            inFlightKey = SPARK_MAX_SIZE_IN_FLIGHT;
        }
        if (inFlight < 1) {
            throw new IllegalArgumentException(inFlightKey + " must be positive, got " + inFlight + " bytes");
        }
        return new RdmaShuffleConf(transport, inFlight, slab, bytes(options, "bufferPoolMaxBytes", "256m"), fb,
                registration.equals("eager"),
                conf.getBoolean("spark.shuffle.checksum.enabled", true),
                conf.get("spark.shuffle.checksum.algorithm", "ADLER32").trim().toUpperCase(Locale.ROOT),
                // Spark's own switch, with Spark's default: blocks of executors on this host are read from their files.
                conf.getBoolean(SPARK_READ_HOST_LOCAL_DISK, true) && !conf.getBoolean("spark.shuffle.useOldFetchProtocol", false),
                idleTimeout(conf, options));
    }

    /**
     * The {@code spark.shuffle.rdma.*} settings by their Spark names (without the prefix). A deprecated kebab-case
     * name yields to the camelCase one when both are set.
     */
    private static Map<String, String> sparkNamed(SparkConf conf, Consumer<String> warnings) {
        Map<String, String> options = new TreeMap<>();
        Map<String, String> deprecated = new TreeMap<>();
        List<String> unknown = new ArrayList<>();
        for (Tuple2<String, String> kv : conf.getAllWithPrefix(PREFIX)) {
            String name = camel(kv._1());
            if (!name.equals(kv._1()) && KEYS.contains(name)) {
                warnings.accept("The configuration key '" + PREFIX + kv._1() + "' is deprecated and may be removed in"
                        + " the future: use '" + PREFIX + name + "' instead");
                deprecated.put(name, kv._2());
            } else {
                options.put(kv._1(), kv._2());
            }
            if (!KEYS.contains(name)) {
                unknown.add(PREFIX + kv._1()); // kept as written: a mistyped key must not turn into another
            }
        }
        deprecated.forEach(options::putIfAbsent);
        if (!unknown.isEmpty()) {
            unknown.sort(null);
            warnings.accept("Unknown rdma4j shuffle settings " + unknown + " (a typo?); the known keys are " + PREFIX
                    + String.join(", " + PREFIX, KEYS));
        }
        return options;
    }

    /**
     * {@code connectionIdleTimeout}, else Spark's {@code spark.shuffle.io.connectionTimeout}, else
     * {@code spark.network.timeout} (120s), as Spark reads them: a plain number is seconds.
     */
    private static Duration idleTimeout(SparkConf conf, Map<String, String> options) {
        String key = options.containsKey("connectionIdleTimeout") ? PREFIX + "connectionIdleTimeout"
                : conf.contains(SPARK_CONNECTION_TIMEOUT) ? SPARK_CONNECTION_TIMEOUT : "spark.network.timeout";
        String value = options.getOrDefault("connectionIdleTimeout", conf.get(SPARK_CONNECTION_TIMEOUT, conf.get("spark.network.timeout", "120s")));
        long millis;
        try {
            String v = value.trim();
            millis = v.chars().allMatch(Character::isDigit) && !v.isEmpty() ? JavaUtils.timeStringAsSec(v) * 1000 : JavaUtils.timeStringAsMs(v);
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(key + " needs a duration like 500ms, 60s or 2min, got '" + value + "'");
        }
        if (millis < 1) {
            throw new IllegalArgumentException(key + " must be positive, got '" + value + "'");
        }
        return Duration.ofMillis(millis);
    }

    private static long bytes(Map<String, String> options, String key, String fallback) {
        String value = options.getOrDefault(key, fallback);
        try {
            return JavaUtils.byteStringAsBytes(value.trim());
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(PREFIX + key + " needs a size like 64k, 4m or 1g, got '" + value + "'");
        }
    }

    /** {@code max-bytes-in-flight} → {@code maxBytesInFlight}, {@code tcp.tls.key-store} → {@code tcp.tls.keyStore}. */
    static String camel(String key) {
        Matcher m = DASHED.matcher(key);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            m.appendReplacement(out, m.group(1).toUpperCase(Locale.ROOT));
        }
        return m.appendTail(out).toString();
    }

    /** The inverse, for rdma-core's {@link TransportConfig#fromProperties}: {@code gidIndex} → {@code gid-index}. */
    static String kebab(String key) {
        return UPPER.matcher(key).replaceAll(r -> "-" + r.group().toLowerCase(Locale.ROOT));
    }

    /** An rdma-core message with the Spark names of the keys it names, so that it says what to set in Spark. */
    static String sparkNames(String message) {
        if (message == null) {
            return null;
        }
        String result = message;
        for (String kebab : KEBAB_NAMES) {
            result = result.replaceAll("(?<![\\w.=-])" + Pattern.quote(kebab) + "(?![\\w-])", Matcher.quoteReplacement(camel(kebab)));
        }
        return result;
    }

    /** Logs a warning once per JVM; true when it was logged now. */
    static boolean warnOnce(String message) {
        if (!WARNED.add(message)) {
            return false;
        }
        LOG.warn(message);
        return true;
    }

    PoolConfig poolConfig() {
        return new PoolConfig(bufferSlabSize, Math.min(4096, bufferSlabSize), bufferPoolMaxBytes, bufferPoolMaxBytes, Access.readSink());
    }

    /** Bytes one batched request aims for: several requests stay in flight, as Spark does with maxSizeInFlight / 5. */
    long targetRequestSize() {
        return Math.max(1, maxBytesInFlight / 5);
    }
}
