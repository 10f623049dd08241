package io.rdma4j.kafka.exporter;

import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.TransactionIndexEntry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Reading Kafka's transaction index files as the broker's fetch does, on files written here byte by byte. */
class TransactionIndexScannerTest {

    @TempDir
    Path dir;

    private final TransactionIndexScanner scanner = new TransactionIndexScanner(PartitionExport::fileKey);

    /** An index entry: version, producer, first offset, abort marker, last stable offset once it completed. */
    private static byte[] entry(int version, long producerId, long first, long last, long lastStable) {
        return ByteBuffer.allocate(TransactionIndexEntry.SIZE).putShort((short) version).putLong(producerId).putLong(first)
                .putLong(last).putLong(lastStable).array();
    }

    private static byte[] entry(long producerId, long first, long last, long lastStable) {
        return entry(0, producerId, first, last, lastStable);
    }

    /** A segment at {@code base} with a log file and, unless {@code entries} is null, a transaction index. */
    private TransactionIndexScanner.Segment segment(long base, byte[]... entries) throws IOException {
        Path log = dir.resolve(String.format("%020d.log", base));
        Files.write(log, new byte[] {1});
        if (entries != null) {
            ByteBuffer all = ByteBuffer.allocate(entries.length * TransactionIndexEntry.SIZE + 64);
            for (byte[] e : entries) {
                all.put(e);
            }
            Files.write(dir.resolve(String.format("%020d.txnindex", base)), java.util.Arrays.copyOf(all.array(), all.position()));
        }
        return new TransactionIndexScanner.Segment(base, log, PartitionExport.fileKey(log));
    }

    private static List<Long> producers(AbortedTransactions.Response r) {
        return r.transactions().stream().map(AbortedTransactions.Aborted::producerId).toList();
    }

    @Test
    void collectsTheOverlappingTransactionsAcrossSegmentsInFirstOffsetOrder() throws Exception {
        List<TransactionIndexScanner.Segment> segments = List.of(
                segment(0, entry(1, 5, 20, 21), entry(2, 30, 60, 40)),   // 1 ends before the range
                segment(100, (byte[][]) null),                          // no index: nothing aborted here
                segment(200, entry(3, 90, 210, 150), entry(4, 120, 230, 500)));
        AbortedTransactions.Response r = scanner.scan(segments, 50, 160, 100);
        assertThat(r.status()).isEqualTo(AbortedTransactions.Status.OK);
        assertThat(r.coveredUpTo()).isEqualTo(160);
        assertThat(producers(r)).containsExactly(2L, 3L, 4L); // 2's first offset is below the range, its marker in it
        assertThat(r.transactions().getFirst()).isEqualTo(new AbortedTransactions.Aborted(2, 30, 60));
    }

    @Test
    void stopsAtTheFirstEntryWhoseLastStableOffsetReachesTheRangeEnd() throws Exception {
        // As Kafka: once an entry says the LSO was at or past the end, no later transaction started inside the range.
        // The later entry here does overlap (which the broker never writes); not reading it proves the scan stopped.
        List<TransactionIndexScanner.Segment> segments = List.of(
                segment(0, entry(1, 10, 20, 100), entry(2, 15, 30, 40)),
                segment(200, entry(3, 50, 210, 300)));
        assertThat(producers(scanner.scan(segments, 0, 100, 100))).containsExactly(1L);
        assertThat(producers(scanner.scan(segments, 0, 101, 100))).containsExactly(1L, 2L, 3L);
    }

    @Test
    void aHalfWrittenLastEntryIsNotRead() throws Exception {
        TransactionIndexScanner.Segment s = segment(0, entry(1, 10, 20, 21));
        Files.write(s.indexFile(), java.util.Arrays.copyOf(entry(2, 30, 40, 41), 20), java.nio.file.StandardOpenOption.APPEND);
        assertThat(producers(scanner.scan(List.of(s), 0, 1000, 100))).containsExactly(1L);
    }

    @Test
    void moreTransactionsThanOneReplyHoldsCoverLessOfTheRange() throws Exception {
        List<byte[]> entries = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            entries.add(entry(i, 100 + 10 * i, 500 + i, 100 + 10 * i)); // all still open at the range's end
        }
        TransactionIndexScanner.Segment s = segment(0, entries.toArray(byte[][]::new));
        AbortedTransactions.Response r = scanner.scan(List.of(s), 100, 400, 4);
        // the four starting first are kept; every transaction starting below the first one dropped is among them
        assertThat(producers(r)).containsExactly(0L, 1L, 2L, 3L);
        assertThat(r.coveredUpTo()).isEqualTo(140);
        // a reply to the consumer carries that as it is
        AbortedTransactions.Request asked = new AbortedTransactions.Request("t", 0, 100, 400);
        assertThat(AbortedTransactions.Response.fromBytes(ByteBuffer.wrap(r.toBytes()), asked)).isEqualTo(r);
    }

    @Test
    void aSegmentBeingSwappedInOrReplacedIsChangingNotEmpty() throws Exception {
        TransactionIndexScanner.Segment swapping = segment(0, (byte[][]) null);
        Files.write(dir.resolve(String.format("%020d.txnindex.swap", 0)), entry(1, 10, 20, 21));
        assertThat(scanner.scan(List.of(swapping), 0, 100, 100).status()).isEqualTo(AbortedTransactions.Status.SEGMENTS_CHANGING);

        TransactionIndexScanner.Segment replaced = segment(1000, (byte[][]) null);
        Path cleaned = Files.write(dir.resolve("cleaned"), new byte[] {2}); // created while the old one exists: a new file
        Files.move(cleaned, replaced.logFile(), java.nio.file.StandardCopyOption.REPLACE_EXISTING); // as the cleaner swaps it in
        assertThat(scanner.scan(List.of(replaced), 1000, 1100, 100).status()).isEqualTo(AbortedTransactions.Status.SEGMENTS_CHANGING);

        TransactionIndexScanner.Segment deleted = segment(2000, (byte[][]) null);
        Files.delete(deleted.logFile());
        assertThat(scanner.scan(List.of(deleted), 2000, 2100, 100).status()).isEqualTo(AbortedTransactions.Status.SEGMENTS_CHANGING);

        TransactionIndexScanner.Segment untouched = segment(3000, (byte[][]) null);
        AbortedTransactions.Response r = scanner.scan(List.of(untouched), 3000, 3100, 100);
        assertThat(r.status()).isEqualTo(AbortedTransactions.Status.OK);
        assertThat(r.transactions()).isEmpty();
    }

    @Test
    void anEntryNoBrokerWritesIsMalformed() throws Exception {
        assertThatThrownBy(() -> scanner.scan(List.of(segment(0, entry(1, 1, 10, 20, 21))), 0, 100, 100))
                .isInstanceOf(TransactionIndexEntry.MalformedEntryException.class).hasMessageContaining("version 1");
        assertThatThrownBy(() -> scanner.scan(List.of(segment(100, entry(1, 50, 40, 60))), 100, 200, 100))
                .isInstanceOf(TransactionIndexEntry.MalformedEntryException.class).hasMessageContaining("contradicting");
        // a marker below the segment's base offset cannot be in its index
        assertThatThrownBy(() -> scanner.scan(List.of(segment(200, entry(1, 50, 60, 70))), 200, 300, 100))
                .isInstanceOf(TransactionIndexEntry.MalformedEntryException.class).hasMessageContaining("contradicting");
        assertThatThrownBy(() -> scanner.scan(List.of(segment(300, entry(-1, 350, 360, 370))), 300, 400, 100))
                .isInstanceOf(TransactionIndexEntry.MalformedEntryException.class);
    }
}
