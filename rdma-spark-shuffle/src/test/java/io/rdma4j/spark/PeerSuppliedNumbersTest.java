package io.rdma4j.spark;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.Option;

import java.io.File;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Numbers a peer executor supplies (describe replies, index entries) are checked before they size anything; a
 * describe request for a shuffle this executor does not have leaves nothing behind.
 */
class PeerSuppliedNumbersTest {

    private static final TransportConfig TCP = TransportConfig.builder().provider("tcp").build();

    private static RegionDescriptor region(long address, long length) {
        return new RegionDescriptor("tcp", address, length, 42L + address, Access.remoteRead());
    }

    @Test
    void aDescribeReplyForOtherMapsThanAskedIsAProtocolException() throws Exception {
        AtomicReference<ByteBuffer> forged = new AtomicReference<>();
        try (RdmaTransport server = RdmaTransport.open(TCP); RdmaTransport client = RdmaTransport.open(TCP)) {
            RdmaListener listener = server.listen(new InetSocketAddress("127.0.0.1", 0), RequestHandlers.of(
                    RequestTypes.SPARK_DESCRIBE_MAP_OUTPUTS, RequestHandler.answering((body, context) -> forged.get().duplicate())));
            RdmaConnection c = client.connect(listener.localAddress()).get(30, TimeUnit.SECONDS);
            long[] asked = {3, 9};

            // more map outputs than asked for, each well formed
            forged.set(DescribeMapOutputs.encodeReply(java.util.stream.LongStream.range(0, 50)
                    .mapToObj(id -> new DescribeMapOutputs.MapOutput(id, true, region(1, 80), region(2, 1L << 40), null)).toList()));
            assertThatThrownBy(() -> DescribeMapOutputs.ask(c, 1, asked)).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("announces 50 map outputs for a request of 2");
            // a count far beyond the body
            forged.set(ByteBuffer.allocate(4).putInt(0, Integer.MAX_VALUE));
            assertThatThrownBy(() -> DescribeMapOutputs.ask(c, 1, asked)).isInstanceOf(ProtocolException.class);
            // the right count, other maps
            forged.set(DescribeMapOutputs.encodeReply(List.of(DescribeMapOutputs.MapOutput.missing(3),
                    DescribeMapOutputs.MapOutput.missing(10))));
            assertThatThrownBy(() -> DescribeMapOutputs.ask(c, 1, asked)).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("entry 1 is for map 10");
            // the honest reply goes through on the same connection
            forged.set(DescribeMapOutputs.encodeReply(List.of(DescribeMapOutputs.MapOutput.missing(3),
                    DescribeMapOutputs.MapOutput.missing(9))));
            assertThat(DescribeMapOutputs.ask(c, 1, asked)).extracting(DescribeMapOutputs.MapOutput::mapId).containsExactly(3L, 9L);
        }
    }

    @Test
    void indexEntriesThatWouldSizeABufferWrongAreRefused() {
        ShuffleIndexFormat.checkEntries(new long[] {0, 10, 10, 25}, 25);
        ShuffleIndexFormat.checkEntries(new long[] {100, 200}, 1000);
        assertThatThrownBy(() -> ShuffleIndexFormat.checkEntries(new long[] {-8, 10}, 100))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("negative");
        assertThatThrownBy(() -> ShuffleIndexFormat.checkEntries(new long[] {0, 50, 40}, 100))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("decrease from 50 to 40");
        assertThatThrownBy(() -> ShuffleIndexFormat.checkEntries(new long[] {0, 101}, 100))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("beyond the data file's 100 bytes");
        assertThatThrownBy(() -> ShuffleIndexFormat.checkEntries(new long[] {0, 1L << 40}, 1L << 41))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("a block may have");
        // a wrap-around that a subtraction alone would miss
        assertThatThrownBy(() -> ShuffleIndexFormat.checkEntries(new long[] {Long.MAX_VALUE, Long.MIN_VALUE}, 100))
                .isInstanceOf(ProtocolException.class);
    }

    @Test
    void describingAnUnknownShuffleKeepsNothing(@TempDir Path dir) throws Exception {
        IndexShuffleBlockResolver resolver = new IndexShuffleBlockResolver(new SparkConf()) {
            @Override
            public File getIndexFile(int shuffleId, long mapId, Option<String[]> dirs) {
                return dir.resolve("shuffle_" + shuffleId + "_" + mapId + ".index").toFile();
            }

            @Override
            public File getDataFile(int shuffleId, long mapId) {
                return dir.resolve("shuffle_" + shuffleId + "_" + mapId + ".data").toFile();
            }
        };
        try (RdmaTransport transport = RdmaTransport.open(TCP)) {
            MapOutputPublisher publisher = new MapOutputPublisher(transport, resolver, RdmaShuffleConf.from(new SparkConf()));
            ByteBuffer reply = publisher.describe(DescribeMapOutputs.encodeRequest(987, new long[] {1, 2, 3}), null);
            assertThat(DescribeMapOutputs.decodeReply(reply, new long[] {1, 2, 3}))
                    .allSatisfy(o -> assertThat(o.present()).isFalse());
            assertThat(publisher.shufflesKnown()).as("shuffles with state after describing an unknown one").isZero();
            assertThat(transport.registeredRegions()).isZero();
            publisher.close();
        }
    }
}
