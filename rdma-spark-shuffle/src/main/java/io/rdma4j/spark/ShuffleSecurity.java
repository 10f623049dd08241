package io.rdma4j.spark;

import io.rdma4j.core.TransportConfig;
import org.apache.spark.SparkConf;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.HexFormat;
import java.util.Locale;

/**
 * The shuffle's transport follows Spark's own security settings, so that turning them on protects the RDMA
 * shuffle as it protects Spark's block transfer:
 * <ul>
 * <li>{@code spark.authenticate=true}: peers must prove the application's secret (Spark's
 * {@code SecurityManager}, whether from {@code spark.authenticate.secret}, YARN or Kubernetes). The transport's
 * shared secret is derived from it, so a process of another application, or none, gets no connection and so no
 * descriptor.</li>
 * <li>{@code spark.network.crypto.enabled=true}: the tcp provider runs TLS, authenticated by that secret
 * ({@code tcp.tls.authentication=shared-secret}) unless {@code spark.shuffle.rdma.tcp.tls.*} configures
 * certificates. RDMA READs bypass the hosts' CPUs and cannot be encrypted by rdma4j, so the verbs provider is
 * refused and {@code auto} means tcp.</li>
 * </ul>
 * With {@code spark.authenticate=false} the shuffle serves unauthenticated peers, as Spark's own shuffle does, and
 * rdma4j's protected mode logs that once per executor ({@code allow-unauthenticated}).
 * Anything that would weaken this is refused when the executor's shuffle starts, whatever
 * {@code spark.shuffle.rdma.fallback} says.
 */
final class ShuffleSecurity {

    static final String AUTHENTICATE = "spark.authenticate";
    static final String CRYPTO = "spark.network.crypto.enabled";
    /** Shorter application secrets could be guessed offline from one observed handshake. */
    static final int MIN_SECRET_BYTES = 16;
    private static final byte[] DERIVATION_LABEL = "rdma4j-spark-shuffle-v1".getBytes(StandardCharsets.US_ASCII);

    /** Why the shuffle refuses to start with these security settings; never turned into a fallback. */
    static final class RefusedException extends IllegalStateException {
        RefusedException(String message) {
            super(message);
        }
    }

    private ShuffleSecurity() {
    }

    /** The checks that need only the configuration: run where the manager is made, on the driver and executors. */
    static void check(SparkConf spark, TransportConfig transport) {
        boolean authenticate = spark.getBoolean(AUTHENTICATE, false);
        boolean crypto = spark.getBoolean(CRYPTO, false);
        if (crypto && !authenticate) {
            throw new RefusedException(CRYPTO + "=true needs " + AUTHENTICATE + "=true (the encryption is keyed by the"
                    + " application's secret), as in Spark itself: set " + AUTHENTICATE + "=true");
        }
        if (authenticate && transport.sharedSecretValue().isPresent()) {
            throw new RefusedException(RdmaShuffleConf.PREFIX + "sharedSecret is set, but with " + AUTHENTICATE
                    + "=true the shuffle authenticates peers with the application's secret: remove "
                    + RdmaShuffleConf.PREFIX + "sharedSecret");
        }
        if (crypto && transport.provider().equals("verbs")) {
            throw new RefusedException(CRYPTO + "=true, but rdma4j cannot encrypt RDMA READs on the verbs provider: set "
                    + RdmaShuffleConf.PREFIX + "provider=tcp (TLS) or auto, or " + CRYPTO + "=false if the fabric itself"
                    + " is encrypted");
        }
        if (crypto && transport.option("tcp", "tls").map(v -> v.trim().equalsIgnoreCase("false")).orElse(false)) {
            throw new RefusedException(CRYPTO + "=true, but " + RdmaShuffleConf.PREFIX + "tcp.tls=false: remove that"
                    + " setting (the shuffle then uses TLS keyed by the application's secret)");
        }
    }

    /**
     * The transport config this application's security settings call for; {@code applicationSecret} is Spark's
     * ({@code SecurityManager.getSecretKey()}), null when Spark has none.
     */
    static TransportConfig secured(SparkConf spark, TransportConfig transport, String applicationSecret) {
        check(spark, transport);
        if (!spark.getBoolean(AUTHENTICATE, false)) {
            // As Spark's own block transfer serves any peer then; rdma4j logs its WARN line once the executor listens.
            return transport.toBuilder().allowUnauthenticated(true).build();
        }
        if (applicationSecret == null || applicationSecret.isEmpty()) {
            throw new RefusedException(AUTHENTICATE + "=true but Spark has no application secret on this executor;"
                    + " outside YARN and Kubernetes set spark.authenticate.secret (or spark.authenticate.secret.file)");
        }
        if (applicationSecret.getBytes(StandardCharsets.UTF_8).length < MIN_SECRET_BYTES) {
            throw new RefusedException("the application's secret is shorter than " + MIN_SECRET_BYTES
                    + " bytes (128 bits), too weak to authenticate shuffle peers: set a longer spark.authenticate.secret,"
                    + " e.g. from 'openssl rand -hex 32'");
        }
        TransportConfig.Builder b = transport.toBuilder().sharedSecret(derive(applicationSecret));
        if (spark.getBoolean(CRYPTO, false)) {
            if (transport.provider().equals(TransportConfig.AUTO)) {
                b.provider("tcp");
            }
            if (transport.option("tcp", "tls").isEmpty()) {
                b.providerOption("tcp.tls", "true").providerOption("tcp.tls.authentication", "shared-secret");
            }
        }
        return b.build();
    }

    /** One line for the executor's log: what protects the shuffle. */
    static String describe(SparkConf spark, TransportConfig secured) {
        if (!spark.getBoolean(AUTHENTICATE, false)) {
            return "peers not authenticated (" + AUTHENTICATE + "=false)";
        }
        String tls = secured.option("tcp", "tls").orElse("false").trim().toLowerCase(Locale.ROOT);
        return "peers authenticated by the application's secret"
                + (tls.equals("true") ? ", traffic encrypted with TLS" : ", traffic not encrypted (" + CRYPTO + "=false)");
    }

    /** The transport's shared secret: a key of its own, so Spark's secret itself never travels into rdma4j's config. */
    static String derive(String applicationSecret) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(applicationSecret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            return HexFormat.of().formatHex(mac.doFinal(DERIVATION_LABEL));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is missing from this JDK: " + e, e);
        }
    }
}
