package io.rdma4j.spark;

import io.rdma4j.core.Access;
import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.apache.spark.MapOutputTrackerMaster;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.MapStatus;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

import java.lang.foreign.Arena;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The shuffle under Spark's own security settings: {@code spark.authenticate} and
 * {@code spark.network.crypto.enabled} on a real local-cluster, and the settings it refuses.
 */
class RdmaShuffleSecurityTest {

    private static final String APP_SECRET = "8f2c1e4b9a7d6e5f0c3b2a1908f7e6d5";

    private static SparkConf secured(String appName) {
        return LocalCluster.rdmaConf(appName)
                .set("spark.shuffle.rdma.provider", "auto")
                .set("spark.authenticate", "true")
                .set("spark.authenticate.secret", APP_SECRET)
                .set("spark.network.crypto.enabled", "true");
    }

    private static Throwable failure(CompletableFuture<?> f) throws Exception {
        try {
            f.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("expected the connection to be refused");
    }

    private static TransportConfig.Builder tcp() {
        return TransportConfig.builder().provider("tcp").connectTimeout(java.time.Duration.ofSeconds(10));
    }

    private static TransportConfig.Builder tlsKeyedBy(String applicationSecret) {
        return tcp().sharedSecret(ShuffleSecurity.derive(applicationSecret)).providerOption("tcp.tls", "true")
                .providerOption("tcp.tls.authentication", "shared-secret");
    }

    @Test
    void anAuthenticatedEncryptedShuffleServesOnlyPeersThatKnowTheApplicationsSecret() throws Exception {
        try (JavaSparkContext sc = LocalCluster.start(secured("rdma4j-security"))) {
            JavaPairRDD<Integer, Long> reduced = sc.parallelize(IntStream.range(0, 20_000).boxed().collect(Collectors.toList()), 4)
                    .mapToPair(i -> new Tuple2<>(i % 10, 1L))
                    .reduceByKey(Long::sum, 3);
            Map<Integer, Long> sums = reduced.collectAsMap();
            assertThat(sums).containsExactlyInAnyOrderEntriesOf(
                    IntStream.range(0, 10).boxed().collect(Collectors.toMap(k -> k, k -> 2000L)));

            MapStatus status = Arrays.stream(((MapOutputTrackerMaster) SparkEnv.get().mapOutputTracker())
                    .shuffleStatuses().get(0).get().mapStatuses()).filter(s -> s != null).findFirst().orElseThrow();
            EndpointRegistry.Location registered = EndpointRegistry.connect(SparkEnv.get()).lookup(status.location().executorId());
            assertThat(registered).as("the executor registered its endpoint").isNotNull();
            InetSocketAddress executor = registered.address();

            try (Arena arena = Arena.ofShared();
                 RdmaTransport plain = RdmaTransport.open(tcp().build());
                 RdmaTransport plainWithSecret = RdmaTransport.open(tcp().sharedSecret(ShuffleSecurity.derive(APP_SECRET)).build());
                 RdmaTransport otherApplication = RdmaTransport.open(tlsKeyedBy("an0ther-applications-secret-4242").build());
                 RdmaTransport member = RdmaTransport.open(tlsKeyedBy(APP_SECRET).build())) {
                assertThat(failure(plain.connect(executor))).as("no secret, no TLS").isInstanceOf(RdmaException.class);
                assertThat(failure(plainWithSecret.connect(executor))).as("the secret without TLS").isInstanceOf(RdmaException.class);
                assertThat(failure(otherApplication.connect(executor))).as("another application's secret")
                        .isInstanceOf(AuthenticationException.class);

                try (RdmaConnection c = member.connect(executor).get(30, TimeUnit.SECONDS)) {
                    assertThat(DescribeMapOutputs.ask(c, 4242, new long[] {0, 1, status.mapId()}))
                            .as("a shuffle the executor does not have").allMatch(o -> !o.present());
                    DescribeMapOutputs.MapOutput output = DescribeMapOutputs.ask(c, 0, new long[] {status.mapId()}).getFirst();
                    assertThat(output.present()).isTrue();
                    RegisteredRegion sink = member.register(arena.allocate(output.index().length()), Access.readSink());
                    c.read(output.index(), 0, sink.segment()).get(30, TimeUnit.SECONDS);
                    assertThat(sink.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0))
                            .as("an index file starts at offset 0").isZero();
                }
            }
            // Until here the shuffle must stay: once its RDD is garbage, Spark's ContextCleaner removes it from the
            // executors (and the publisher unpublishes it), which a GC during the connects above did once in CI.
            java.lang.ref.Reference.reachabilityFence(reduced);
        }
    }

    @Test
    void settingsThatWouldWeakenSparksSecurityAreRefused() {
        assertThatThrownBy(() -> new RdmaShuffleManager(new SparkConf().set("spark.network.crypto.enabled", "true"), true))
                .isInstanceOf(ShuffleSecurity.RefusedException.class).hasMessageContaining("spark.authenticate=true");
        SparkConf authenticated = new SparkConf().set("spark.authenticate", "true");
        assertThatThrownBy(() -> new RdmaShuffleManager(authenticated.clone()
                .set("spark.shuffle.rdma.sharedSecret", "a-secret-of-its-own-0123456789"), true))
                .isInstanceOf(ShuffleSecurity.RefusedException.class).hasMessageContaining("remove spark.shuffle.rdma.sharedSecret");
        SparkConf encrypted = authenticated.clone().set("spark.network.crypto.enabled", "true");
        assertThatThrownBy(() -> new RdmaShuffleManager(encrypted.clone().set("spark.shuffle.rdma.provider", "verbs"), true))
                .isInstanceOf(ShuffleSecurity.RefusedException.class).hasMessageContaining("provider=tcp");
        assertThatThrownBy(() -> new RdmaShuffleManager(encrypted.clone().set("spark.shuffle.rdma.tcp.tls", "false"), true))
                .isInstanceOf(ShuffleSecurity.RefusedException.class).hasMessageContaining("tcp.tls=false");

        TransportConfig auto = RdmaShuffleConf.from(encrypted).transport();
        assertThatThrownBy(() -> ShuffleSecurity.secured(encrypted, auto, null))
                .isInstanceOf(ShuffleSecurity.RefusedException.class).hasMessageContaining("spark.authenticate.secret");
        assertThatThrownBy(() -> ShuffleSecurity.secured(encrypted, auto, "short"))
                .isInstanceOf(ShuffleSecurity.RefusedException.class).hasMessageContaining("128 bits");
    }

    @Test
    void theApplicationsSecretKeysTheTransportAndEncryptionFollowsSpark() {
        SparkConf authenticated = new SparkConf().set("spark.authenticate", "true");
        TransportConfig auto = RdmaShuffleConf.from(authenticated).transport();

        TransportConfig authOnly = ShuffleSecurity.secured(authenticated, auto, APP_SECRET);
        assertThat(authOnly.sharedSecretValue()).contains(ShuffleSecurity.derive(APP_SECRET));
        assertThat(authOnly.sharedSecretValue().orElseThrow()).doesNotContain(APP_SECRET).hasSize(64);
        assertThat(authOnly.provider()).isEqualTo("auto");
        assertThat(authOnly.option("tcp", "tls")).isEmpty();
        assertThat(ShuffleSecurity.derive("another-application-secret")).isNotEqualTo(ShuffleSecurity.derive(APP_SECRET));

        SparkConf encrypted = authenticated.clone().set("spark.network.crypto.enabled", "true");
        TransportConfig tls = ShuffleSecurity.secured(encrypted, auto, APP_SECRET);
        assertThat(tls.provider()).as("RDMA READs cannot be encrypted: auto means tcp").isEqualTo("tcp");
        assertThat(tls.option("tcp", "tls")).contains("true");
        assertThat(tls.option("tcp", "tls.authentication")).contains("shared-secret");
        assertThat(ShuffleSecurity.describe(encrypted, tls)).contains("encrypted with TLS");

        SparkConf certificates = encrypted.clone().set("spark.shuffle.rdma.tcp.tls", "true")
                .set("spark.shuffle.rdma.tcp.tls.keyStore", "/etc/spark/rdma.p12");
        TransportConfig own = ShuffleSecurity.secured(certificates, RdmaShuffleConf.from(certificates).transport(), APP_SECRET);
        assertThat(own.option("tcp", "tls.authentication")).as("the user's certificates are kept").isEmpty();
        assertThat(own.sharedSecretValue()).isPresent();

        assertThat(authOnly.allowUnauthenticated()).as("with spark.authenticate peers prove the secret").isFalse();
        TransportConfig open = ShuffleSecurity.secured(new SparkConf(), auto, null);
        assertThat(open.allowUnauthenticated()).as("spark.authenticate=false serves any peer, as Spark does").isTrue();
        assertThat(open.toBuilder().allowUnauthenticated(false).build()).isEqualTo(auto);
    }
}
