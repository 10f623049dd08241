package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.TestBatches;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The exported segment list while Kafka's log cleaner rewrites a partition directory, replayed file by file as the
 * broker renames them: the log never shows a hole to consumers, and emptied segments are no end of the log.
 */
class PartitionExportTest {

    private static final int LEADER = 1;

    @TempDir
    Path dir;

    private RdmaTransport transport;
    private final AtomicInteger retired = new AtomicInteger();

    @BeforeEach
    void open() {
        transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
    }

    @AfterEach
    void close() {
        transport.close();
    }

    private PartitionExport export(Duration swapWait) {
        return new PartitionExport(new TopicPartition("t", 0), dir, transport, SegmentMapper.PAGE_CACHE, (region, arena) -> {
            retired.incrementAndGet();
            region.close();
            arena.close();
        }, swapWait);
    }

    private Path segment(long base, String suffix, ByteBuffer... batches) throws Exception {
        ByteBuffer all = TestBatches.concat(batches);
        byte[] bytes = new byte[all.remaining()];
        all.get(bytes);
        return Files.write(dir.resolve(String.format("%020d.log", base) + suffix), bytes);
    }

    private static void move(Path from, Path to) throws Exception {
        Files.move(from, to, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    private Path log(long base) {
        return dir.resolve(String.format("%020d.log", base));
    }

    @Test
    void segmentsReplacedByTheCleanerStayExportedUntilTheSwapCompletes() throws Exception {
        segment(0, "", TestBatches.data(0, 10, 1, false));
        segment(100, "", TestBatches.data(100, 10, 1, false));
        segment(150, "", TestBatches.data(150, 5, 1, false));
        segment(200, "", TestBatches.data(200, 5, 1, false));
        try (PartitionExport p = export(Duration.ofSeconds(30))) {
            p.syncSegments();
            long before = p.publish(205, 0, 205, LEADER).generation();
            assertThat(startOf(p, 151)).isEqualTo(150);

            // The cleaner merges segments 100 and 150 into a new segment 100, thinned: 104-105 and 152 survive.
            // Kafka renames: cleaned to .swap, the replaced segments to .deleted, then .swap to the segment's name.
            Path cleaned = segment(100, ".cleaned", TestBatches.data(104, 2, 1, false), TestBatches.data(152, 1, 1, false));
            move(cleaned, dir.resolve(log(100).getFileName() + ".swap"));
            move(log(100), dir.resolve(log(100).getFileName() + ".deleted"));
            move(log(150), dir.resolve(log(150).getFileName() + ".deleted"));
            p.syncSegments();
            assertThat(p.publish(205, 0, 205, LEADER).generation()).as("nothing changed while the swap is under way").isEqualTo(before);
            // Were 100 and 150 dropped now, a read from 151 would start past segment 0's end, at 200: records skipped.
            assertThat(startOf(p, 151)).as("offset 151 is still served, from the old segment").isEqualTo(150);
            assertThat(retired).hasValue(0);

            move(dir.resolve(log(100).getFileName() + ".swap"), log(100));
            p.syncSegments();
            assertThat(p.publish(205, 0, 205, LEADER).generation()).as("one change for the whole swap").isEqualTo(before + 1);
            SegmentDirectory.Response r = p.directory(151);
            assertThat(r.segments()).extracting(SegmentDirectory.Segment::baseOffset).containsExactly(100L, 200L);
            assertThat(r.startPosition()).as("the batch holding 152 in the cleaned segment")
                    .isEqualTo(TestBatches.data(104, 2, 1, false).remaining());
            assertThat(retired).as("both replaced segments").hasValue(2);
            assertThat(startOf(p, 5)).isZero();
        }
    }

    @Test
    void aLingeringSwapFileHoldsVanishedSegmentsNoLongerThanTheWait() throws Exception {
        segment(0, "", TestBatches.data(0, 10, 1, false));
        segment(100, "", TestBatches.data(100, 5, 1, false));
        try (PartitionExport p = export(Duration.ZERO)) {
            p.syncSegments();
            p.publish(105, 0, 105, LEADER);
            Files.write(dir.resolve("00000000000000000050.log.swap"), new byte[] {1});
            Files.delete(log(0)); // retention, while a stray .swap lies in the directory
            p.syncSegments();
            assertThat(retired).hasValue(1);
            assertThat(p.directory(5).status()).isEqualTo(SegmentDirectory.Status.OFFSET_NOT_EXPORTED);
        }
    }

    @Test
    void aDirectoryCarriesTheWatermarkPublishedWithItsSegments() throws Exception {
        segment(0, "", TestBatches.data(0, 5, 1, false), TestBatches.data(5, 5, 1, false));
        try (PartitionExport p = export(Duration.ofSeconds(30))) {
            p.syncSegments();
            Watermark first = p.publish(5, 0, 5, LEADER);
            assertThat(first.highWatermark()).isEqualTo(5);
            assertThat(p.directory(2).watermark()).as("the watermark a READ of its region would find, without the READ")
                    .isEqualTo(first);
            Watermark next = p.publish(10, 0, 10, LEADER);
            assertThat(next.highWatermark()).isEqualTo(10);
            assertThat(p.directory(2).watermark()).isEqualTo(next).isEqualTo(p.published());
        }
    }

    /**
     * A consumer still waiting for its offset reset asks from the log start or the high watermark: the answer is the
     * directory from the offset the published watermark names, which the reply carries; before a watermark is
     * published, and for any other negative offset, nothing is exported there.
     */
    @Test
    void aDirectoryAskedFromTheLogStartOrTheHighWatermarkStartsAtThePublishedOne() throws Exception {
        segment(0, "", TestBatches.data(0, 5, 1, false), TestBatches.data(5, 5, 1, false), TestBatches.data(10, 5, 1, false));
        try (PartitionExport p = export(Duration.ofSeconds(30))) {
            p.syncSegments();
            assertThat(p.directory(SegmentDirectory.Request.EARLIEST).status()).as("nothing published yet")
                    .isEqualTo(SegmentDirectory.Status.OFFSET_NOT_EXPORTED);
            p.publish(10, 5, 10, LEADER); // records below 5 deleted (DeleteRecords)

            SegmentDirectory.Response earliest = p.directory(SegmentDirectory.Request.EARLIEST);
            assertThat(earliest).isEqualTo(p.directory(5));
            assertThat(earliest.startPosition()).as("the second batch").isEqualTo(TestBatches.data(0, 5, 1, false).remaining());
            assertThat(SegmentDirectory.Request.resolve(SegmentDirectory.Request.EARLIEST, earliest.watermark())).isEqualTo(5);

            SegmentDirectory.Response latest = p.directory(SegmentDirectory.Request.LATEST);
            assertThat(latest).isEqualTo(p.directory(10));
            assertThat(SegmentDirectory.Request.resolve(SegmentDirectory.Request.LATEST, latest.watermark())).isEqualTo(10);

            assertThat(p.directory(-3).status()).isEqualTo(SegmentDirectory.Status.OFFSET_NOT_EXPORTED);
            assertThat(p.directory(Long.MIN_VALUE).status()).isEqualTo(SegmentDirectory.Status.OFFSET_NOT_EXPORTED);
        }
    }

    @Test
    void anOffsetInASegmentTheCleanerEmptiedIsServedFromTheNextSegment() throws Exception {
        segment(0, ""); // every record removed, and it is the first segment
        segment(100, "", TestBatches.data(100, 10, 1, false));
        segment(200, "", TestBatches.data(200, 5, 1, false));
        try (PartitionExport p = export(Duration.ofSeconds(30))) {
            p.syncSegments();
            p.publish(205, 0, 205, LEADER);
            SegmentDirectory.Response r = p.directory(0);
            assertThat(r.status()).isEqualTo(SegmentDirectory.Status.OK);
            assertThat(r.segments()).extracting(SegmentDirectory.Segment::baseOffset).containsExactly(100L, 200L);
            assertThat(r.startPosition()).isZero();
            assertThat(startOf(p, 150)).isEqualTo(200);
            assertThat(p.transactionIndexSegments(0)).extracting(TransactionIndexScanner.Segment::baseOffset)
                    .containsExactly(100L, 200L);
        }
    }

    /**
     * A follower truncating its log after a leader change cuts the active segment back in place (same file). The
     * export maps what is left, publishes nothing past it even while the leader's high watermark is higher, and a
     * publish that meets the truncation before the segment list is synced fails with an IOException, not an Error
     * from the faulting mapping.
     */
    @Test
    void aSegmentTruncatedInPlaceIsExportedOnlyUpToItsNewEnd() throws Exception {
        ByteBuffer[] batches = new ByteBuffer[400];
        for (int i = 0; i < batches.length; i++) {
            batches[i] = TestBatches.data(i * 10L, 10, 1, false);
        }
        segment(0, "", batches);
        long kept = 0;
        for (int i = 0; i < 3; i++) {
            kept += batches[i].remaining(); // well inside the first page of a file of many
        }
        assertThat(Files.size(log(0))).as("the segment spans many pages").isGreaterThan(8 * 4096);
        try (PartitionExport p = export(Duration.ofSeconds(30))) {
            p.syncSegments();
            Watermark before = p.publish(4000, 0, 4000, LEADER);
            assertThat(before.highWatermark()).isEqualTo(4000);

            try (FileChannel ch = FileChannel.open(log(0), StandardOpenOption.WRITE)) {
                ch.truncate(kept);
            }
            assertThatThrownBy(() -> p.publish(4000, 0, 4000, LEADER)).as("published before the segment list was synced")
                    .isInstanceOf(java.io.IOException.class).hasMessageContaining("truncated");

            p.syncSegments();
            Watermark after = p.publish(4000, 0, 4000, LEADER);
            assertThat(after.highWatermark()).as("what is left on disk, though the leader's is higher").isEqualTo(30);
            assertThat(after.hwPosition()).isEqualTo(kept);
            assertThat(after.generation()).as("a change consumers see").isGreaterThan(before.generation());
            assertThat(p.directory(0).segments().getFirst().exportedLength()).isEqualTo(kept);
            assertThat(retired).as("the old mapping").hasValue(1);
        }
    }

    /**
     * The responder, not only the consumer, keeps records at or above the high watermark from peers: a segment is
     * registered only up to the watermark's byte position, so a raw peer with a valid connection and the segment's
     * descriptor reading past it is refused (the tcp provider then closes the connection, as a queue pair errs); the
     * registration follows the watermark, and the segment is complete for consumers only once registered in full.
     */
    @Test
    void aRawPeerCannotReadAByteAboveThePublishedHighWatermark() throws Exception {
        ByteBuffer[] batches = {TestBatches.data(0, 10, 1, false), TestBatches.data(10, 10, 1, false), TestBatches.data(20, 10, 1, false)};
        segment(0, "", batches);
        segment(30, "", TestBatches.data(30, 5, 1, false), TestBatches.data(35, 5, 1, false)); // wholly above the watermark
        long belowHw = batches[0].remaining() + batches[1].remaining();
        try (PartitionExport p = export(Duration.ofSeconds(30));
             io.rdma4j.core.RdmaListener listener = transport.listen(new java.net.InetSocketAddress("127.0.0.1", 0),
                     io.rdma4j.core.RequestHandlers.of(io.rdma4j.core.RequestTypes.KAFKA_DIRECTORY, io.rdma4j.core.RequestHandler.answering(
                             (body, context) -> ByteBuffer.wrap(p.directory(0).toBytes()))));
             java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared(); // freed after the peer deregisters it
             RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").build())) {
            p.syncSegments();
            Watermark w = p.publish(20, 0, 20, LEADER);
            assertThat(w.hwPosition()).isEqualTo(belowHw);
            java.lang.foreign.MemorySegment into = peer.register(arena.allocate(Files.size(log(0))), io.rdma4j.core.Access.readSink())
                    .segment();
            SegmentDirectory.Response r;
            try (io.rdma4j.core.RdmaConnection c = peer.connect(listener.localAddress()).get()) {
                r = SegmentDirectory.Response.fromBytes(c.requestAndWait(io.rdma4j.core.RequestTypes.KAFKA_DIRECTORY,
                        ByteBuffer.wrap(new SegmentDirectory.Request("t", 0, 0).toBytes())));
                assertThat(r.segments()).as("segment 30 lies above the watermark: not registered, not listed").hasSize(1);
                SegmentDirectory.Segment first = r.segments().getFirst();
                assertThat(first.region().length()).as("registered bytes").isEqualTo(belowHw);
                assertThat(first.complete()).as("registered again as the watermark moves").isFalse();
                c.readAndWait(first.region(), 0, into.asSlice(0, belowHw)); // below the watermark: served
                assertThatThrownBy(() -> c.readAndWait(first.region(), 0, into.asSlice(0, belowHw + 1)))
                        .as("one byte above the watermark").isInstanceOf(io.rdma4j.core.RemoteAccessException.class)
                        .extracting(e -> ((io.rdma4j.core.RemoteAccessException) e).reason())
                        .isEqualTo(io.rdma4j.core.RemoteAccessException.Reason.OUT_OF_RANGE);
            }

            Watermark moved = p.publish(35, 0, 35, LEADER);
            assertThat(moved.generation()).as("consumers look the directory up again").isGreaterThan(w.generation());
            SegmentDirectory.Response after = p.directory(0);
            assertThat(after.segments()).extracting(SegmentDirectory.Segment::baseOffset).containsExactly(0L, 30L);
            assertThat(after.segments().getFirst().complete()).as("segment 0 now registered in full").isTrue();
            assertThat(after.segments().getFirst().region().length()).isEqualTo(Files.size(log(0)));
            assertThat(after.segments().get(1).region().length()).as("segment 30 up to offset 35")
                    .isEqualTo(TestBatches.data(30, 5, 1, false).remaining());
        }
    }

    /** The base offset of the segment a read from {@code offset} starts in; 200 when it starts past segment 100's end. */
    private static long startOf(PartitionExport p, long offset) {
        SegmentDirectory.Response r = p.directory(offset);
        assertThat(r.status()).as("directory from %d", offset).isEqualTo(SegmentDirectory.Status.OK);
        SegmentDirectory.Segment first = r.segments().getFirst();
        return r.startPosition() == first.exportedLength() && r.segments().size() > 1 ? r.segments().get(1).baseOffset()
                : first.baseOffset();
    }
}
