package io.rdma4j.spark;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The {@code spark.shuffle.rdma.*} keys in Spark's camelCase, their deprecated kebab-case aliases and typos. */
class RdmaShuffleConfTest {

    private static final String P = RdmaShuffleConf.PREFIX;

    @Test
    void camelCaseKeysReachTheTransport() {
        List<String> warnings = new ArrayList<>();
        RdmaShuffleConf conf = RdmaShuffleConf.from(new SparkConf()
                .set(P + "provider", "tcp").set(P + "gidIndex", "3").set(P + "connectTimeout", "3s")
                .set(P + "operationTimeout", "2m").set(P + "maxOutstandingOperations", "8").set(P + "maxMessageSize", "1024")
                .set(P + "sharedSecret", "a-secret-of-sixteen-bytes").set(P + "tcp.chunkSize", "64k")
                .set(P + "tcp.tls.keyStore", "/etc/spark/rdma.p12").set(P + "verbs.receiveDepth", "64")
                .set(P + "bufferSlabSize", "64k").set(P + "bufferPoolMaxBytes", "1m").set(P + "maxBytesInFlight", "2m")
                .set(P + "fallback", "fail").set(P + "registration", "eager"), warnings::add);
        TransportConfig t = conf.transport();
        assertThat(t.provider()).isEqualTo("tcp");
        assertThat(t.gidIndex()).isEqualTo(3);
        assertThat(t.connectTimeout()).hasSeconds(3);
        assertThat(t.operationTimeout()).hasMinutes(2);
        assertThat(t.maxOutstandingOperations()).isEqualTo(8);
        assertThat(t.maxMessageSize()).isEqualTo(1024);
        assertThat(t.sharedSecretValue()).contains("a-secret-of-sixteen-bytes");
        assertThat(t.option("tcp", "chunk-size")).contains("64k");
        assertThat(t.option("tcp", "tls.key-store")).contains("/etc/spark/rdma.p12");
        assertThat(t.option("verbs", "receive-depth")).contains("64");
        assertThat(conf.bufferSlabSize()).isEqualTo(64 << 10);
        assertThat(conf.bufferPoolMaxBytes()).isEqualTo(1 << 20);
        assertThat(conf.maxBytesInFlight()).isEqualTo(2 << 20);
        assertThat(conf.fallback()).isEqualTo(RdmaShuffleConf.Fallback.FAIL);
        assertThat(conf.eagerRegistration()).isTrue();
        assertThat(warnings).as("only known keys, no aliases").isEmpty();
    }

    @Test
    void kebabCaseKeysAreDeprecatedAliasesThatNameTheNewKey() {
        List<String> warnings = new ArrayList<>();
        RdmaShuffleConf conf = RdmaShuffleConf.from(new SparkConf()
                .set(P + "max-bytes-in-flight", "1m").set(P + "connect-timeout", "4s").set(P + "tcp.chunk-size", "128k")
                .set(P + "buffer-slab-size", "8k").set(P + "bufferSlabSize", "16k"), warnings::add);
        assertThat(conf.maxBytesInFlight()).isEqualTo(1 << 20);
        assertThat(conf.transport().connectTimeout()).hasSeconds(4);
        assertThat(conf.transport().option("tcp", "chunk-size")).contains("128k");
        assertThat(conf.bufferSlabSize()).as("the camelCase key wins over its alias").isEqualTo(16 << 10);
        assertThat(warnings).hasSize(4).anySatisfy(w -> assertThat(w)
                .contains("'" + P + "max-bytes-in-flight' is deprecated").contains("use '" + P + "maxBytesInFlight'"));
        assertThat(warnings).anySatisfy(w -> assertThat(w).contains("use '" + P + "tcp.chunkSize'"));

        String once = "The configuration key 'spark.shuffle.rdma.test-" + System.nanoTime() + "' is deprecated";
        assertThat(RdmaShuffleConf.warnOnce(once)).isTrue();
        assertThat(RdmaShuffleConf.warnOnce(once)).as("logged once per JVM").isFalse();
    }

    @Test
    void unknownKeysGetOneWarningWithTheKnownKeys() {
        List<String> warnings = new ArrayList<>();
        RdmaShuffleConf.from(new SparkConf().set(P + "maxBytesInFligth", "1m").set(P + "buffer-slab-sise", "8k")
                .set(P + "provider", "tcp"), warnings::add);
        assertThat(warnings).hasSize(1);
        assertThat(warnings.getFirst()).contains("[" + P + "buffer-slab-sise, " + P + "maxBytesInFligth]")
                .contains(P + "maxBytesInFlight").contains(P + "tcp.chunkSize").doesNotContain("deprecated");
    }

    @Test
    void sparksMaxSizeInFlightIsTheDefaultBound() {
        assertThat(RdmaShuffleConf.from(new SparkConf()).maxBytesInFlight()).as("Spark's default, 48m").isEqualTo(48L << 20);
        assertThat(RdmaShuffleConf.from(new SparkConf().set("spark.reducer.maxSizeInFlight", "96m")).maxBytesInFlight())
                .isEqualTo(96L << 20);
        assertThat(RdmaShuffleConf.from(new SparkConf().set("spark.reducer.maxSizeInFlight", "24")).maxBytesInFlight())
                .as("a plain number is MiB, as Spark reads it").isEqualTo(24L << 20);
        assertThat(RdmaShuffleConf.from(new SparkConf().set("spark.reducer.maxSizeInFlight", "96m")
                .set(P + "maxBytesInFlight", "1m")).maxBytesInFlight()).as("the rdma key overrides").isEqualTo(1L << 20);
        assertThatThrownBy(() -> RdmaShuffleConf.from(new SparkConf().set("spark.reducer.maxSizeInFlight", "0")))
                .hasMessageContaining("spark.reducer.maxSizeInFlight must be positive");
    }

    @Test
    void connectionsCloseWhenIdleForSparksConnectionTimeout() {
        assertThat(RdmaShuffleConf.from(new SparkConf()).connectionIdleTimeout()).as("spark.network.timeout's default")
                .hasSeconds(120);
        assertThat(RdmaShuffleConf.from(new SparkConf().set("spark.network.timeout", "300s")).connectionIdleTimeout())
                .hasSeconds(300);
        assertThat(RdmaShuffleConf.from(new SparkConf().set("spark.network.timeout", "300s")
                .set("spark.shuffle.io.connectionTimeout", "90")).connectionIdleTimeout()).as("a plain number is seconds")
                .hasSeconds(90);
        assertThat(RdmaShuffleConf.from(new SparkConf().set("spark.shuffle.io.connectionTimeout", "90s")
                .set(P + "connectionIdleTimeout", "500ms")).connectionIdleTimeout()).as("the rdma key overrides")
                .hasMillis(500);
        assertThatThrownBy(() -> RdmaShuffleConf.from(new SparkConf().set(P + "connectionIdleTimeout", "soon")))
                .hasMessageContaining(P + "connectionIdleTimeout needs a duration");
        assertThatThrownBy(() -> RdmaShuffleConf.from(new SparkConf().set("spark.shuffle.io.connectionTimeout", "0s")))
                .hasMessageContaining("spark.shuffle.io.connectionTimeout must be positive");
    }

    @Test
    void errorsNameTheSparkKeys() {
        assertThatThrownBy(() -> RdmaShuffleConf.from(new SparkConf().set(P + "connectTimeout", "soon")))
                .hasMessageContaining("'connectTimeout' needs a duration").hasMessageNotContaining("connect-timeout");
        assertThatThrownBy(() -> RdmaShuffleConf.from(new SparkConf().set(P + "maxBytesInFlight", "lots")))
                .hasMessageContaining(P + "maxBytesInFlight needs a size");
        assertThat(RdmaShuffleConf.sparkNames("unknown tcp provider option 'tcp.chunk-sizee'; known: tcp.chunk-size,"
                + " tcp.max-connections-per-address; tcp.tls.authentication=shared-secret needs shared-secret"))
                .isEqualTo("unknown tcp provider option 'tcp.chunk-sizee'; known: tcp.chunkSize,"
                        + " tcp.maxConnectionsPerAddress; tcp.tls.authentication=shared-secret needs sharedSecret");
    }

    @Test
    void theKnownTcpKeysAreRdmaCoresTcpOptions() {
        // rdma-core lists its tcp options when one is unknown: the Spark names must cover exactly those.
        assertThatThrownBy(() -> RdmaTransport.open(TransportConfig.builder().provider("tcp")
                .providerOption("tcp.no-such-option", "1").build()).close())
                .isInstanceOf(IllegalArgumentException.class)
                .satisfies(e -> {
                    String known = e.getMessage().substring(e.getMessage().indexOf("known: ") + "known: ".length());
                    List<String> core = Arrays.stream(known.split(",")).map(String::trim).sorted().toList();
                    List<String> spark = RdmaShuffleConf.KEYS.stream().filter(k -> k.startsWith("tcp."))
                            .map(RdmaShuffleConf::kebab).sorted().toList();
                    assertThat(spark).isEqualTo(core);
                });
    }
}
