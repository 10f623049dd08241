package io.rdma4j.kafka;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.kafka.protocol.RecordBatchParser;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.CRC32C;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * An exporter that lies: directory replies and batch headers whose numbers would size reads or allocations are
 * refused before anything is acquired from the consumer's pool; the consumer falls back to Kafka.
 */
class LyingExporterTest {

    private static final TransportConfig TCP = TransportConfig.builder().provider("tcp").build();
    private static final TopicPartition TP = new TopicPartition("t", 0);
    /** One v2 record (zigzag varints): length 7, attributes 0, deltas 0, null key, a 1-byte value 'x', no headers. */
    private static final byte[] HONEST_RECORD = {14, 0, 0, 0, 1, 2, 0x78, 0};

    private static RegionDescriptor region(long length) {
        return new RegionDescriptor("tcp", 4096, length, 77, Access.remoteRead());
    }

    private static SegmentDirectory.Response ok(long startPosition, SegmentDirectory.Segment... segments) {
        return new SegmentDirectory.Response(SegmentDirectory.Status.OK, region(Watermark.SIZE), startPosition, List.of(segments));
    }

    @Test
    void aLyingDirectoryIsRefusedBeforeAnythingIsRead() throws Exception {
        AtomicReference<byte[]> forged = new AtomicReference<>();
        try (RdmaTransport exporter = RdmaTransport.open(TCP); RdmaTransport consumer = RdmaTransport.open(TCP)) {
            RdmaListener listener = exporter.listen(new InetSocketAddress("127.0.0.1", 0), RequestHandlers.of(
                    RequestTypes.KAFKA_DIRECTORY, RequestHandler.answering((body, context) -> ByteBuffer.wrap(forged.get()))));
            try (RdmaFetcher fetcher = new RdmaFetcher(consumer, listener.localAddress(), Duration.ofSeconds(1))) {
                // the pipeline works: an honest "not exported" answer falls back for that reason
                forged.set(new SegmentDirectory.Response(SegmentDirectory.Status.UNKNOWN_PARTITION, null, -1, List.of()).toBytes());
                assertThat(fetch(fetcher)).contains("is not exported");

                List<SegmentDirectory.Response> lies = List.of(
                        ok(0, new SegmentDirectory.Segment(0, 1L << 40, false, region(4096))),      // exported past its region
                        ok(0, new SegmentDirectory.Segment(0, -5, false, region(4096))),           // negative length
                        ok(5000, new SegmentDirectory.Segment(0, 4096, false, region(4096))),      // start past the segment
                        ok(0, new SegmentDirectory.Segment(10, 10, true, region(10)),
                                new SegmentDirectory.Segment(10, 10, false, region(10))),          // base offsets repeat
                        new SegmentDirectory.Response(SegmentDirectory.Status.OK, region(8), 0,    // no room for a watermark
                                List.of(new SegmentDirectory.Segment(0, 10, false, region(10)))));
                for (SegmentDirectory.Response lie : lies) {
                    forged.set(lie.toBytes());
                    assertThat(fetch(fetcher)).as("fallback for %s", lie).contains(ProtocolException.class.getSimpleName());
                    assertThat(fetcher.pool.outstandingBuffers()).isZero();
                    assertThat(fetcher.pool.pooledBytes()).as("pool bytes after %s", lie).isZero();
                    assertThat(fetcher.pool.oneOffRegistrations()).isZero();
                }
                assertThat(fetcher.directoryRequests.sum()).isEqualTo(1 + lies.size());
            }
        }
    }

    @Test
    void aBatchClaimingMoreRecordsOrHeadersThanItsBytesIsCorrupt() {
        // a valid CRC over a lying count: the CRC proves the bytes came intact, not that the numbers are sane
        ByteBuffer batch = batch(Integer.MAX_VALUE, HONEST_RECORD);
        RecordBatchParser.Batch parsed = RecordBatchParser.batches(batch).getFirst();
        parsed.ensureValid();
        assertThatThrownBy(parsed::records).isInstanceOf(CorruptRecordException.class)
                .hasMessageContaining("claims 2147483647 records in 8 bytes");
        // one record whose header count is huge
        ByteBuffer headers = batch(1, new byte[] {22, 0, 0, 0, 1, 2, 0x78, (byte) 0xfe, (byte) 0xff, (byte) 0xff, (byte) 0xff, 0x0f});
        RecordBatchParser.Batch withHeaders = RecordBatchParser.batches(headers).getFirst();
        withHeaders.ensureValid();
        assertThatThrownBy(withHeaders::records).isInstanceOf(CorruptRecordException.class).hasMessageContaining("headers in");
        // the honest record parses
        ByteBuffer honest = batch(1, HONEST_RECORD);
        assertThat(RecordBatchParser.batches(honest).getFirst().records()).hasSize(1);
    }

    private static String fetch(RdmaFetcher fetcher) {
        RdmaFetcher.Result r = fetcher.fetch(TP, 0, 10, 1 << 16, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        assertThat(r).isInstanceOf(RdmaFetcher.Fallback.class);
        return ((RdmaFetcher.Fallback) r).reason();
    }

    /** A v2 batch at offset 0 with {@code recordCount} in its header and {@code records} as its record bytes. */
    private static ByteBuffer batch(int recordCount, byte[] records) {
        ByteBuffer b = ByteBuffer.allocate(61 + records.length);
        b.putLong(0).putInt(61 + records.length - 12).putInt(0).put((byte) 2).putInt(0).putShort((short) 0)
                .putInt(0).putLong(0).putLong(0).putLong(-1).putShort((short) -1).putInt(-1).putInt(recordCount).put(records);
        CRC32C crc = new CRC32C();
        crc.update(b.duplicate().position(21).limit(b.capacity()));
        b.putInt(17, (int) crc.getValue());
        return b.flip().position(0).limit(b.capacity());
    }
}
