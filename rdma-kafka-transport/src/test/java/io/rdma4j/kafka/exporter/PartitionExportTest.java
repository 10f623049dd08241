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

    /** The base offset of the segment a read from {@code offset} starts in; 200 when it starts past segment 100's end. */
    private static long startOf(PartitionExport p, long offset) {
        SegmentDirectory.Response r = p.directory(offset);
        assertThat(r.status()).as("directory from %d", offset).isEqualTo(SegmentDirectory.Status.OK);
        SegmentDirectory.Segment first = r.segments().getFirst();
        return r.startPosition() == first.exportedLength() && r.segments().size() > 1 ? r.segments().get(1).baseOffset()
                : first.baseOffset();
    }
}
