package io.rdma4j.kafka.exporter;

import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.TransactionIndexEntry;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.PriorityQueue;
import java.util.function.Function;

/**
 * Collects the aborted transactions overlapping an offset range from the segments' transaction indexes, as
 * Kafka's {@code UnifiedLog.collectAbortedTransactions} does for a fetch: from the segment holding the first offset
 * onwards, until an entry's last stable offset reaches the end of the range (no transaction completing later can
 * have started inside it). Files are streamed through a fixed buffer, and at most {@code maxEntries} transactions
 * (those starting first) are kept, so neither index size nor abort count sizes memory.
 */
final class TransactionIndexScanner {

    private static final int ENTRIES_PER_READ = 256;

    /**
     * A segment whose index is read: its log file and the identity the exporter mapped it under, to tell a segment
     * without aborted transactions (Kafka creates the index lazily) from one being replaced or deleted.
     */
    record Segment(long baseOffset, Path logFile, Object fileKey) {
        Path indexFile() {
            String log = logFile.getFileName().toString();
            return logFile.resolveSibling(log.substring(0, log.length() - ".log".length()) + ".txnindex");
        }
    }

    private final Function<Path, Object> fileKeys;

    TransactionIndexScanner(Function<Path, Object> fileKeys) {
        this.fileKeys = fileKeys;
    }

    /**
     * @param segments from the one holding {@code fromOffset}, in base offset order
     * @throws TransactionIndexEntry.MalformedEntryException for an index entry no broker writes
     */
    AbortedTransactions.Response scan(List<Segment> segments, long fromOffset, long toOffset, int maxEntries) throws IOException {
        // A max-heap on the first offset: the transactions starting last are dropped first.
        PriorityQueue<TransactionIndexEntry> kept = new PriorityQueue<>(
                Comparator.comparingLong(TransactionIndexEntry::firstOffset).reversed());
        long firstDropped = Long.MAX_VALUE;
        ByteBuffer buffer = ByteBuffer.allocate(ENTRIES_PER_READ * TransactionIndexEntry.SIZE);
        segments:
        for (Segment s : segments) {
            FileChannel channel;
            try {
                channel = FileChannel.open(s.indexFile(), StandardOpenOption.READ);
            } catch (NoSuchFileException e) {
                if (changing(s)) {
                    return AbortedTransactions.Response.of(AbortedTransactions.Status.SEGMENTS_CHANGING);
                }
                continue; // no transaction was aborted in this segment
            }
            try (channel) {
                // The broker appends whole entries but a reader may catch one half-written: only whole entries count,
                // and a half-written one is a marker past the range's last stable offset.
                long whole = channel.size() / TransactionIndexEntry.SIZE * TransactionIndexEntry.SIZE;
                long position = 0;
                while (position < whole) {
                    buffer.clear().limit((int) Math.min(buffer.capacity(), whole - position));
                    while (buffer.hasRemaining()) {
                        if (channel.read(buffer, position + buffer.position()) < 0) {
                            return AbortedTransactions.Response.of(AbortedTransactions.Status.SEGMENTS_CHANGING); // truncated meanwhile
                        }
                    }
                    position += buffer.flip().remaining();
                    while (buffer.hasRemaining()) {
                        TransactionIndexEntry e = TransactionIndexEntry.read(buffer, s.baseOffset());
                        if (e.overlaps(fromOffset, toOffset)) {
                            kept.add(e);
                            if (kept.size() > maxEntries) {
                                firstDropped = Math.min(firstDropped, kept.poll().firstOffset());
                            }
                        }
                        if (e.lastStableOffset() >= toOffset) {
                            break segments;
                        }
                    }
                }
            }
        }
        List<AbortedTransactions.Aborted> out = new ArrayList<>(kept.size());
        kept.stream().sorted(Comparator.comparingLong(TransactionIndexEntry::firstOffset))
                .forEach(e -> out.add(e.aborted()));
        return new AbortedTransactions.Response(AbortedTransactions.Status.OK, Math.max(fromOffset, Math.min(toOffset, firstDropped)), out);
    }

    /** Whether the segment is being replaced (the cleaner's swap files) or is no longer the file the exporter mapped. */
    private boolean changing(Segment s) {
        Path index = s.indexFile();
        if (Files.exists(index.resolveSibling(index.getFileName() + ".swap"))) {
            return true;
        }
        return !Objects.equals(fileKeys.apply(s.logFile()), s.fileKey());
    }
}
