package io.rdma4j.spark;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.Access;
import org.apache.spark.SparkConf;
import scala.Tuple2;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Options of {@link RdmaShuffleManager}, all under {@code spark.shuffle.rdma.}.
 *
 * <table>
 * <caption>spark.shuffle.rdma.*</caption>
 * <tr><th>key</th><th>default</th><th>meaning</th></tr>
 * <tr><td>provider</td><td>auto</td><td>rdma4j provider: {@code auto}, {@code verbs} or {@code tcp}</td></tr>
 * <tr><td>device, port, gid-index, interface</td><td>(auto)</td><td>verbs device selection overrides</td></tr>
 * <tr><td>address</td><td>(block manager host)</td><td>IP address the executor's rdma4j endpoint listens on; for verbs
 *     also the address whose RoCE GID is used</td></tr>
 * <tr><td>connect-timeout, operation-timeout, max-outstanding-operations, max-message-size, shared-secret, tcp.*</td>
 *     <td>see TransportConfig</td><td>passed to the rdma4j transport</td></tr>
 * <tr><td>max-bytes-in-flight</td><td>48m</td><td>remote bytes a reducer has requested and not yet consumed</td></tr>
 * <tr><td>buffer-slab-size</td><td>4m</td><td>registered slab size of the reducer buffer pool (power of two)</td></tr>
 * <tr><td>buffer-pool-max-bytes</td><td>256m</td><td>registered memory the pool keeps per executor</td></tr>
 * <tr><td>fallback</td><td>spark</td><td>a peer not reachable by RDMA: {@code spark} (Spark's own block transfer) or {@code fail}</td></tr>
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
        String checksumAlgorithm) {

    public static final String PREFIX = "spark.shuffle.rdma.";

    /** What a reducer does when a peer cannot be reached by RDMA. */
    public enum Fallback { SPARK, FAIL }

    public static RdmaShuffleConf from(SparkConf conf) {
        Map<String, String> flat = new HashMap<>();
        for (Tuple2<String, String> kv : conf.getAllWithPrefix(PREFIX)) {
            flat.put(PREFIX + kv._1(), kv._2());
        }
        TransportConfig transport = TransportConfig.fromProperties(flat, PREFIX);
        String fallback = conf.get(PREFIX + "fallback", "spark").trim().toUpperCase(Locale.ROOT);
        Fallback fb;
        try {
            fb = Fallback.valueOf(fallback);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(PREFIX + "fallback must be 'spark' or 'fail', got '" + fallback.toLowerCase(Locale.ROOT) + "'");
        }
        String registration = conf.get(PREFIX + "registration", "lazy").trim().toLowerCase(Locale.ROOT);
        if (!registration.equals("lazy") && !registration.equals("eager")) {
            throw new IllegalArgumentException(PREFIX + "registration must be 'lazy' or 'eager', got '" + registration + "'");
        }
        long slab = conf.getSizeAsBytes(PREFIX + "buffer-slab-size", "4m");
        if (Long.bitCount(slab) != 1 || slab < 4096) {
            throw new IllegalArgumentException(PREFIX + "buffer-slab-size must be a power of two of at least 4k, got " + slab);
        }
        long inFlight = conf.getSizeAsBytes(PREFIX + "max-bytes-in-flight", "48m");
        if (inFlight < 1) {
            throw new IllegalArgumentException(PREFIX + "max-bytes-in-flight must be positive, got " + inFlight);
        }
        return new RdmaShuffleConf(transport, inFlight, slab,
                conf.getSizeAsBytes(PREFIX + "buffer-pool-max-bytes", "256m"), fb, registration.equals("eager"),
                conf.getBoolean("spark.shuffle.checksum.enabled", true),
                conf.get("spark.shuffle.checksum.algorithm", "ADLER32").trim().toUpperCase(Locale.ROOT));
    }

    PoolConfig poolConfig() {
        return new PoolConfig(bufferSlabSize, Math.min(4096, bufferSlabSize), bufferPoolMaxBytes, bufferPoolMaxBytes, Access.readSink());
    }

    /** Bytes one batched request aims for: several requests stay in flight, as Spark does with maxSizeInFlight / 5. */
    long targetRequestSize() {
        return Math.max(1, maxBytesInFlight / 5);
    }
}
