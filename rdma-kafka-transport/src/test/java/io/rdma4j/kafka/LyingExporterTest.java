package io.rdma4j.kafka;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.RecordBatchParser;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.TestBatches;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

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
                awaitConnected(fetcher);
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
                    assertThat(fetcher.pool().outstandingBuffers()).isZero();
                    assertThat(fetcher.pool().pooledBytes()).as("pool bytes after %s", lie).isZero();
                    assertThat(fetcher.pool().oneOffRegistrations()).isZero();
                }
                assertThat(fetcher.directoryRequests()).isEqualTo(1 + lies.size());
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

    /**
     * A partition holding A's aborted transaction (offsets 0-1, abort marker at 3) around a plain record at 2, and a
     * plain record at 4, served from registered memory. Whatever the exporter answers about aborted transactions, a
     * read_committed fetch returns the committed records or falls back; never an aborted one.
     */
    @Test
    void aLyingAbortedTransactionsReplyFallsBackAndNeverReturnsAnAbortedRecord() throws Exception {
        long a = 7;
        ByteBuffer log = TestBatches.concat(TestBatches.data(0, 2, a, true), TestBatches.data(2, 1, 9, false),
                TestBatches.marker(3, a, true), TestBatches.data(4, 1, 9, false));
        AtomicReference<java.util.function.Function<AbortedTransactions.Request, AbortedTransactions.Response>> forged =
                new AtomicReference<>();
        AtomicReference<AbortedTransactions.Request> asked = new AtomicReference<>();
        try (RdmaTransport exporter = RdmaTransport.open(TCP); RdmaTransport consumer = RdmaTransport.open(TCP);
             Arena arena = Arena.ofShared()) {
            MemorySegment segmentMemory = arena.allocate(log.remaining(), 8);
            segmentMemory.asByteBuffer().put(log.duplicate());
            RegisteredRegion segment = exporter.register(segmentMemory, Access.remoteRead());
            RegisteredRegion watermark = exporter.register(arena.allocate(Watermark.SIZE, 8), Access.remoteRead());
            SegmentDirectory.Response directory = new SegmentDirectory.Response(SegmentDirectory.Status.OK, watermark.descriptor(), 0,
                    List.of(new SegmentDirectory.Segment(0, log.remaining(), false, segment.descriptor())));
            RdmaListener listener = exporter.listen(new InetSocketAddress("127.0.0.1", 0), RequestHandlers
                    .of(RequestTypes.KAFKA_DIRECTORY, RequestHandler.answering((body, context) -> ByteBuffer.wrap(directory.toBytes())))
                    .and(RequestTypes.KAFKA_ABORTED_TRANSACTIONS, RequestHandler.answering((body, context) -> {
                        asked.set(AbortedTransactions.Request.fromBytes(body));
                        AbortedTransactions.Response r = forged.get().apply(asked.get());
                        if (r == null) {
                            throw new RequestRefusedException("the transaction index cannot be read");
                        }
                        return ByteBuffer.wrap(r.toBytes());
                    })));
            java.util.function.LongConsumer lastStable = lso -> new Watermark(5, 0, log.remaining(), 0, lso, 0, 1,
                    System.currentTimeMillis(), Watermark.UNKNOWN_LEADER).writeTo(watermark.segment());
            lastStable.accept(5);
            AbortedTransactions.Aborted aborted = new AbortedTransactions.Aborted(a, 0, 3);
            try (RdmaFetcher committed = new RdmaFetcher(consumer, ExporterLocator.fixed(listener.localAddress()), null, ExporterConnections.Timing.of(Duration.ofSeconds(1)), RdmaFetchMetrics.detached(), true, true,
                    Long.MAX_VALUE);
                 RdmaFetcher uncommitted = new RdmaFetcher(consumer, listener.localAddress(), Duration.ofSeconds(1))) {
                awaitConnected(committed);
                awaitConnected(uncommitted);
                // read_uncommitted returns the aborted records and never asks
                assertThat(offsets(uncommitted.fetch(TP, 0, 10, 1 << 16, BYTES, BYTES))).containsExactly(0L, 1L, 2L, 4L);
                assertThat(uncommitted.abortedTransactionRequests.sum()).isZero();

                // honest: the aborted batch and the marker are skipped, the position moves past them
                forged.set(request -> new AbortedTransactions.Response(AbortedTransactions.Status.OK, request.toOffset(), List.of(aborted)));
                FetchResult honest = committed.fetch(TP, 0, 10, 1 << 16, BYTES, BYTES);
                assertThat(offsets(honest)).containsExactly(2L, 4L);
                assertThat(((FetchResult.Records<?, ?>) honest).nextOffset()).isEqualTo(5);
                assertThat(asked.get()).isEqualTo(new AbortedTransactions.Request(TP.topic(), TP.partition(), 0, 5));

                // nothing at or above the last stable offset: the record at 4 waits
                lastStable.accept(4);
                FetchResult belowStable = committed.fetch(TP, 0, 10, 1 << 16, BYTES, BYTES);
                assertThat(offsets(belowStable)).containsExactly(2L);
                assertThat(((FetchResult.Records<?, ?>) belowStable).nextOffset()).isEqualTo(4);
                assertThat(asked.get().toOffset()).as("asked only up to the stable batches").isEqualTo(4);
                lastStable.accept(5);

                // a reply covering part of the range serves the batches below what it covers
                forged.set(request -> new AbortedTransactions.Response(AbortedTransactions.Status.OK, 3, List.of(aborted)));
                FetchResult partly = committed.fetch(TP, 0, 10, 1 << 16, BYTES, BYTES);
                assertThat(offsets(partly)).containsExactly(2L);
                assertThat(((FetchResult.Records<?, ?>) partly).nextOffset()).isEqualTo(3);

                List<AbortedTransactions.Response> unusable = new ArrayList<>(List.of(
                        new AbortedTransactions.Response(AbortedTransactions.Status.OK, 6, List.of(aborted)),      // covers past the range
                        new AbortedTransactions.Response(AbortedTransactions.Status.OK, 5,
                                List.of(new AbortedTransactions.Aborted(a, 3, 1))),                                   // marker before start
                        new AbortedTransactions.Response(AbortedTransactions.Status.OK, 5,
                                List.of(new AbortedTransactions.Aborted(a, 9, 12))),                                  // outside the range
                        new AbortedTransactions.Response(AbortedTransactions.Status.OK, 0, List.of(aborted)),      // covers nothing
                        AbortedTransactions.Response.of(AbortedTransactions.Status.OFFSET_NOT_EXPORTED)));
                unusable.add(null); // refused
                for (AbortedTransactions.Response lie : unusable) {
                    forged.set(request -> lie);
                    FetchResult r = committed.fetch(TP, 0, 10, 1 << 16, BYTES, BYTES);
                    assertThat(r).as("%s", lie).isInstanceOf(FetchResult.Fallback.class);
                    assertThat(((FetchResult.Fallback) r).kind()).as("%s", lie).isEqualTo(FallbackReason.ABORTED_TRANSACTIONS);
                    assertThat(committed.pool().outstandingBuffers()).isZero();
                }
                forged.set(request -> AbortedTransactions.Response.of(AbortedTransactions.Status.SEGMENTS_CHANGING));
                FetchResult changing = committed.fetch(TP, 0, 10, 1 << 16, BYTES, BYTES);
                assertThat(((FetchResult.Fallback) changing).kind()).isEqualTo(FallbackReason.DIRECTORY_CHANGING);
                assertThat(committed.abortedTransactionRequests.sum()).isEqualTo(4 + unusable.size());
            }
        }
    }

    private static final ByteArrayDeserializer BYTES = new ByteArrayDeserializer();

    private static List<Long> offsets(FetchResult r) {
        assertThat(r).isInstanceOf(FetchResult.Records.class);
        return ((FetchResult.Records<?, ?>) r).records().stream().map(c -> c.offset()).toList();
    }

    /** Until the fetcher's connection to the exporter is set up: a fetch before falls back, not waiting for it. */
    private static void awaitConnected(RdmaFetcher fetcher) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!fetcher.connectAhead(List.of(TP))) {
            assertThat(System.nanoTime()).as("connected within 30 s").isLessThan(deadline);
            Thread.sleep(5);
        }
    }

    private static String fetch(RdmaFetcher fetcher) {
        FetchResult r = fetcher.fetch(TP, 0, 10, 1 << 16, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        assertThat(r).isInstanceOf(FetchResult.Fallback.class);
        return ((FetchResult.Fallback) r).reason();
    }

    /** A v2 batch at offset 0 with {@code recordCount} in its header and {@code records} as its record bytes. */
    private static ByteBuffer batch(int recordCount, byte[] records) {
        return TestBatches.batch(0, 0, TestBatches.NO_PRODUCER, 0, recordCount, records);
    }
}
