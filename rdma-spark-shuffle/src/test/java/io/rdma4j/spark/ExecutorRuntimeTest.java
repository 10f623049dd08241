package io.rdma4j.spark;

import io.rdma4j.core.RdmaConnection;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import scala.Option;
import scala.Tuple2;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * One executor's runtime on its own, in a real local-mode Spark driver (its SparkEnv, RPC and block manager) on the tcp
 * provider: what it registers with the driver, how it finds and keeps connections to peers, which map-output
 * descriptions it caches, and whose files it reads host-locally. The runtime is its own peer here: the driver's
 * registry knows it, and it connects to its own endpoint.
 */
class ExecutorRuntimeTest {

    private static final int SHUFFLE = 0;

    private static JavaSparkContext sc;
    private static SparkEnv env;
    private static IndexShuffleBlockResolver resolver;
    private ExecutorRuntime runtime;

    @BeforeAll
    static void startDriver() {
        SparkConf conf = new SparkConf().setMaster("local[1]").setAppName("executor-runtime-test")
                .set("spark.ui.enabled", "false")
                .set("spark.driver.host", "127.0.0.1")
                .set("spark.driver.bindAddress", "127.0.0.1")
                .set("spark.local.dir", Path.of("target", "executor-runtime-test").toAbsolutePath().toString())
                .set("spark.shuffle.rdma.provider", "tcp");
        sc = new JavaSparkContext(conf);
        env = SparkEnv.get();
        EndpointRegistry.startOnDriver(env);
        resolver = new IndexShuffleBlockResolver(conf, env.blockManager());
    }

    @AfterAll
    static void stopDriver() {
        if (sc != null) {
            sc.stop();
        }
    }

    @BeforeEach
    void start() {
        runtime = ExecutorRuntime.start(RdmaShuffleConf.from(env.conf()), env, resolver);
    }

    @AfterEach
    void close() {
        runtime.unregisterShuffle(SHUFFLE);
        runtime.close();
        resolver.removeDataByMap(SHUFFLE, 1);
        resolver.removeDataByMap(SHUFFLE, 2);
    }

    @Test
    void registersItsEndpointAndLocalDirectoriesWithTheDriver() {
        EndpointRegistry.Location location = EndpointRegistry.connect(env).lookup(runtime.executorId);
        assertThat(location).isNotNull();
        assertThat(location.address().getPort()).isEqualTo(runtime.endpoint().getPort()).isPositive();
        assertThat(location.localDirs()).containsExactly(env.blockManager().diskBlockManager().localDirsString());
        assertThat(runtime.transport.provider()).isEqualTo("tcp");
    }

    @Test
    void aPeerWithoutAnEndpointIsUnreachableAndSaysWhy() {
        assertThatThrownBy(() -> runtime.connection("no-such-executor")).isInstanceOf(PeerUnreachableException.class)
                .hasMessageContaining("executor no-such-executor has no rdma4j endpoint");
    }

    @Test
    void oneConnectionPerPeerUntilItIsForgotten() throws Exception {
        RdmaConnection first;
        try (PeerConnections.Lease a = runtime.connection(runtime.executorId);
             PeerConnections.Lease b = runtime.connection(runtime.executorId)) {
            first = a.connection();
            assertThat(b.connection()).as("a second reader shares the open connection").isSameAs(first);
            assertThat(runtime.peerConnections()).isEqualTo(1);
        }
        runtime.forget(runtime.executorId, first);
        assertThat(runtime.peerConnections()).isZero();
        try (PeerConnections.Lease again = runtime.connection(runtime.executorId)) {
            assertThat(again.connection()).as("the next reader connects anew").isNotSameAs(first);
        }
    }

    @Test
    void describesAndCachesOnlyTheMapOutputsThatExist() throws Exception {
        writeMapOutput(1, "abc", "", "defgh");
        try (PeerConnections.Lease lease = runtime.connection(runtime.executorId)) {
            Map<Long, DescribeMapOutputs.MapOutput> first = runtime.describe(runtime.executorId, lease.connection(), SHUFFLE, List.of(1L, 2L));
            assertThat(first.get(1L).present()).isTrue();
            assertThat(first.get(1L).data().length()).isEqualTo(8);
            assertThat(first.get(2L).present()).as("map 2 has no files yet").isFalse();

            // Map 2 appears: map 1 comes from the cache (the answer kept, not a new one), map 2 is asked for again.
            writeMapOutput(2, "xy");
            Map<Long, DescribeMapOutputs.MapOutput> second = runtime.describe(runtime.executorId, lease.connection(), SHUFFLE, List.of(1L, 2L));
            assertThat(second.get(1L)).as("cached").isSameAs(first.get(1L));
            assertThat(second.get(2L).present()).as("a missing output is not cached").isTrue();

            // A late describe after the shuffle was unregistered (its files still on disk until Spark deletes them) is
            // neither answered from the cache nor registers the files again, which nothing would release.
            runtime.unregisterShuffle(SHUFFLE);
            Map<Long, DescribeMapOutputs.MapOutput> third = runtime.describe(runtime.executorId, lease.connection(), SHUFFLE, List.of(1L));
            assertThat(third.get(1L).present()).as("the cache went with the shuffle, and the shuffle is served no more").isFalse();
            assertThat(runtime.publisher.publishedCount()).isZero();
            assertThat(runtime.publisher.publish(SHUFFLE, 2)).as("an eager publish of a zombie map task").isNull();
            assertThat(runtime.publisher.shufflesKnown()).isZero();
        }
    }

    @Test
    void readsHostLocallyOnlyFromPeersOnItsOwnHost() {
        BlockManagerId own = env.blockManager().blockManagerId();
        BlockManagerId sameHost = BlockManagerId.apply(runtime.executorId, own.host(), own.port(), Option.empty());
        assertThat(runtime.hostLocalDirs(sameHost)).as("Spark's readHostLocalDisk is on by default")
                .containsExactly(env.blockManager().diskBlockManager().localDirsString());
        BlockManagerId elsewhere = BlockManagerId.apply(runtime.executorId, "10.255.255.1", own.port(), Option.empty());
        assertThat(runtime.hostLocalDirs(elsewhere)).isNull();
        BlockManagerId unknown = BlockManagerId.apply("no-such-executor", own.host(), own.port(), Option.empty());
        assertThat(runtime.hostLocalDirs(unknown)).as("the driver knows no directories of it").isNull();
    }

    /**
     * A reader that meets an unreachable peer after a peer on its own host cleans up before it falls back to Spark's
     * transfer, and again when its task ends: the second cleanup must not fail the task (the host-local files' arena
     * closes once).
     */
    @Test
    void aFetcherFallingBackAfterAHostLocalPeerCleansUpTwiceWithoutFailing() {
        BlockManagerId own = env.blockManager().blockManagerId();
        EndpointRegistry.connect(env).register("host-peer", runtime.endpoint(), "tcp",
                List.of(env.blockManager().diskBlockManager().localDirsString()));
        BlockManagerId hostPeer = BlockManagerId.apply("host-peer", own.host(), own.port(), Option.empty());
        BlockManagerId unreachable = BlockManagerId.apply("no-such-executor", "10.255.255.1", own.port(), Option.empty());
        List<Tuple2<BlockManagerId, List<WantedBlock>>> groups = List.of(
                new Tuple2<>(hostPeer, List.of(new WantedBlock(new ShuffleBlockId(SHUFFLE, 1, 0), 0))),
                new Tuple2<>(unreachable, List.of(new WantedBlock(new ShuffleBlockId(SHUFFLE, 2, 0), 1))));
        RdmaBlockFetcher fetcher = new RdmaBlockFetcher(runtime, SHUFFLE, null, null, env.serializerManager(), null);
        assertThatThrownBy(() -> fetcher.start(groups)).isInstanceOf(PeerUnreachableException.class);
        fetcher.cleanup(); // the reader, falling back
        fetcher.cleanup(); // the task's completion listener
    }

    /**
     * A map output the executor cannot register (past its registered-memory limit) is answered "not served", and is
     * not tried again at once for the next reducer's request: on verbs each try pins the file's pages until the limit
     * stops it. Here the files shrink below the limit meanwhile, and the answer stays until the refusal is 10 s old.
     */
    @Test
    void aRefusedMapOutputIsNotTriedAgainAtEachRequest() throws Exception {
        writeMapOutput(1, "x".repeat(64 << 10));
        try (io.rdma4j.core.RdmaTransport limited = io.rdma4j.core.RdmaTransport.open(io.rdma4j.core.TransportConfig.builder()
                .provider("tcp").providerOption("tcp.max-registered-bytes", "16k").build())) {
            MapOutputPublisher publisher = new MapOutputPublisher(limited, resolver, RdmaShuffleConf.from(env.conf()));
            long[] map1 = {1};
            assertThat(DescribeMapOutputs.decodeReply(publisher.describe(DescribeMapOutputs.encodeRequest(SHUFFLE, map1), null), map1))
                    .singleElement().satisfies(o -> assertThat(o.notServed()).isTrue());
            resolver.removeDataByMap(SHUFFLE, 1);
            writeMapOutput(1, "small");
            assertThat(DescribeMapOutputs.decodeReply(publisher.describe(DescribeMapOutputs.encodeRequest(SHUFFLE, map1), null), map1))
                    .as("refused moments ago").singleElement().satisfies(o -> assertThat(o.notServed()).isTrue());
            assertThat(limited.registeredRegions()).isZero();
            publisher.close();
        }
    }

    /** Map output {@code mapId} of {@link #SHUFFLE} with one partition per string, as Spark's sort shuffle writes it. */
    private static void writeMapOutput(long mapId, String... partitions) throws IOException {
        File data = Files.createTempFile(Path.of("target"), "map-output", ".tmp").toFile();
        Files.writeString(data.toPath(), String.join("", partitions));
        long[] lengths = java.util.Arrays.stream(partitions).mapToLong(String::length).toArray();
        resolver.writeMetadataFileAndCommit(SHUFFLE, mapId, lengths, new long[0], data);
    }
}
