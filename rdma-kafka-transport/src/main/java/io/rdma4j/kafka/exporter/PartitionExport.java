package io.rdma4j.kafka.exporter;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredMemoryLimitException;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.kafka.protocol.BatchHeaders;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * One exported partition: its segment files, each mapped read-only for the exporter's own walks over batch headers and
 * registered for peers only up to the published high watermark (a segment wholly below it in full, the one holding it
 * up to its byte position, later ones not at all), so that no peer can read a byte the consumer may not (uncommitted,
 * possibly truncated by a failover) nor a page past the end of file; and its watermark record. All state is guarded by
 * {@code this}.
 */
final class PartitionExport implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(PartitionExport.class);

    private static final Pattern SEGMENT_FILE = Pattern.compile("\\d{20}\\.log");
    /** Kafka's suffix for the files of a segment being swapped in (the log cleaner's, or recovery's). */
    private static final String SWAP_SUFFIX = ".swap";

    private final TopicPartition partition;
    private final Path directory;
    private final RdmaTransport transport;
    private final SegmentMapper mapper;
    private final Retirer retirer;
    private final Arena watermarkArena = Arena.ofShared();
    private final RegisteredRegion watermarkRegion;
    private final TreeMap<Long, ExportedSegment> segments = new TreeMap<>();
    /** Rolled segments without a byte (the cleaner removed every record): nothing to map, no records to serve. */
    private final TreeSet<Long> emptySegments = new TreeSet<>();
    private final Duration swapWait;
    /** Since when a swap has been seen in progress (System.nanoTime), or -1. */
    private long swapSeenSinceNanos = -1;
    private long generation;
    /** The segment list changed since the last publish: the next watermark carries a new generation. */
    private boolean listChanged;
    private long remaps;
    // Where the last high-watermark walk stopped, so the next one continues from there.
    private ExportedSegment scanSegment;
    private BatchHeaders.Position scanPosition;
    private Watermark published;

    /** Closes replaced regions later, so peers that still hold their descriptors finish their reads. */
    interface Retirer {
        void retire(RegisteredRegion region, Arena arena);
    }

    /**
     * @param swapWait how long segments whose files vanished stay exported while a swap is in progress, in case a
     *                 {@code .swap} file lingers
     */
    PartitionExport(TopicPartition partition, Path directory, RdmaTransport transport, SegmentMapper mapper, Retirer retirer,
                    Duration swapWait) {
        this.partition = partition;
        this.swapWait = swapWait;
        this.directory = directory;
        this.transport = transport;
        this.mapper = mapper;
        this.retirer = retirer;
        MemorySegment record = watermarkArena.allocate(Watermark.SIZE, 8);
        this.watermarkRegion = transport.register(record, Access.remoteRead());
    }

    TopicPartition partition() {
        return partition;
    }

    Path directory() {
        return directory;
    }

    synchronized long remaps() {
        return remaps;
    }

    synchronized Watermark published() {
        return published;
    }

    /**
     * Brings the segment list in line with the directory: new, rolled, replaced (compaction) and deleted files.
     *
     * <p>The log cleaner swaps a cleaned segment in by renaming: the cleaned files to {@code .swap}, then the files of
     * the segments it replaces to {@code .deleted}, then the {@code .swap} files to their names. In between, the
     * replaced segments have no file at all; they stay exported meanwhile (their mappings still hold the old bytes,
     * consistent on their own), so a consumer never finds a hole in the log where the cleaner is at work.
     */
    synchronized void syncSegments() throws IOException {
        TreeMap<Long, Path> onDisk = new TreeMap<>();
        boolean swapping = false;
        try (var files = Files.list(directory)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                String name = f.getFileName().toString();
                // .deleted/.cleaned/.swap files are not matched: they are on their way out or not yet in.
                if (SEGMENT_FILE.matcher(name).matches()) {
                    onDisk.put(Long.parseLong(name.substring(0, 20)), f);
                } else if (name.endsWith(SWAP_SUFFIX)) {
                    swapping = true;
                }
            }
        } catch (NoSuchFileException gone) {
            onDisk.clear(); // The partition was deleted or moved.
        }
        long now = System.nanoTime();
        if (!swapping) {
            swapSeenSinceNanos = -1;
        } else if (swapSeenSinceNanos == -1) {
            swapSeenSinceNanos = now;
        }
        boolean holdVanished = swapping && now - swapSeenSinceNanos < swapWait.toNanos();
        boolean changed = false;
        for (var it = segments.entrySet().iterator(); it.hasNext(); ) {
            var e = it.next();
            Path file = onDisk.get(e.getKey());
            if (file == null && holdVanished) {
                continue;
            }
            if (file == null || !Objects.equals(fileKey(file), e.getValue().fileKey)) {
                retire(e.getValue());
                it.remove();
                changed = true;
            }
        }
        long last = onDisk.isEmpty() ? -1 : onDisk.lastKey();
        if (!holdVanished) {
            changed |= emptySegments.retainAll(onDisk.keySet());
        }
        for (var e : onDisk.entrySet()) {
            ExportedSegment s = segments.get(e.getKey());
            boolean rolled = e.getKey() != last;
            if (s == null) {
                if (rolled && size(e.getValue()) == 0) {
                    changed |= emptySegments.add(e.getKey());
                    continue;
                }
                changed |= emptySegments.remove(e.getKey());
                s = map(e.getKey(), e.getValue(), rolled);
                if (s != null) {
                    segments.put(e.getKey(), s);
                    changed = true;
                }
            } else if (!rolled && isTruncated(s, size(e.getValue()))) {
                // Kafka truncates a log by deleting whole segments past the point and cutting back the one holding
                // it, which is then the last: only the last segment's size needs checking.
                changed = true;
                ExportedSegment shorter = truncated(s);
                if (shorter == null) {
                    segments.remove(e.getKey());
                } else {
                    segments.put(e.getKey(), shorter);
                }
            } else if (rolled && !s.complete) {
                // Rolled since it was mapped: map it once more, in full; it never grows again.
                segments.put(e.getKey(), remap(s, true));
                changed = true;
            }
        }
        listChanged |= changed;
    }

    /**
     * Publishes a new watermark: the byte position of the high watermark is found by walking batch
     * headers, remapping the segment when the high watermark has moved past the mapped bytes.
     *
     * @param leaderId the partition's leader as last learnt from the cluster, or {@link Watermark#UNKNOWN_LEADER}
     */
    synchronized Watermark publish(long highWatermark, long logStartOffset, long lastStableOffset, int leaderId) throws IOException {
        var floor = segments.floorEntry(highWatermark);
        long hwSegmentBase;
        BatchHeaders.Position reached;
        if (floor == null) {
            // Nothing exported at or below the high watermark (an empty or just-deleted log).
            hwSegmentBase = segments.isEmpty() ? highWatermark : segments.firstKey();
            reached = new BatchHeaders.Position(0, hwSegmentBase);
        } else {
            ExportedSegment s = floor.getValue();
            BatchHeaders.Position from = scanSegment == s && scanPosition.nextOffset() <= highWatermark
                    ? scanPosition : new BatchHeaders.Position(0, s.baseOffset);
            long onDisk = size(s.file);
            if (isTruncated(s, onDisk)) {
                throw new IOException("segment " + s.baseOffset + " of " + partition + " was truncated in place since the"
                        + " segment list was synced; it is mapped again at the next refresh");
            }
            reached = walk(s, from, highWatermark);
            if (reached.nextOffset() < highWatermark && !s.complete && onDisk > s.mappedLength) {
                s = remap(s, false);
                reached = walk(s, reached, highWatermark);
            }
            scanSegment = s;
            scanPosition = reached;
            hwSegmentBase = s.baseOffset;
        }
        // On a lagging replica the log may end below the leader's high watermark: publish what is here.
        long servedHighWatermark = floor == null ? Math.min(highWatermark, hwSegmentBase) : Math.min(highWatermark, reached.nextOffset());
        if (floor != null && reached.nextOffset() < highWatermark && reached.bytePosition() == floor.getValue().mappedLength
                && floor.getValue().complete) {
            servedHighWatermark = highWatermark; // The segment is complete; the next one starts at or above the HW.
        }
        if (registerBelow(floor == null ? Long.MIN_VALUE : hwSegmentBase, reached.bytePosition()) | listChanged) {
            generation++; // Once per publish: consumers look the directory up again once.
            listChanged = false;
        }
        long active = segments.isEmpty() ? hwSegmentBase : segments.lastKey();
        Watermark w = new Watermark(servedHighWatermark, hwSegmentBase, reached.bytePosition(), logStartOffset,
                Math.min(lastStableOffset, servedHighWatermark), active, generation, System.currentTimeMillis(), leaderId);
        w.writeTo(watermarkRegion.segment());
        published = w;
        return w;
    }

    /**
     * Walks {@code s}'s batch headers. A file truncated under its mapping between the size check and the walk makes
     * the pages past its new end fault; the JVM reports that as an {@link InternalError}, which fails this refresh
     * only.
     */
    private static BatchHeaders.Position walk(ExportedSegment s, BatchHeaders.Position from, long stopOffset) throws IOException {
        try {
            return BatchHeaders.walk(s.memory, from.bytePosition(), from.nextOffset(), s.mappedLength, stopOffset);
        } catch (InternalError e) {
            throw new IOException("segment " + s.baseOffset + " faulted while its batch headers were read (truncated"
                    + " in place?); it is mapped again at the next refresh", e);
        }
    }

    /**
     * The exported segment a read from {@code fromOffset} starts in: the one holding it, or, where {@code fromOffset}
     * lies in a segment the cleaner emptied, the next exported one (the offsets between hold no records). Null when
     * {@code fromOffset} is not exported.
     */
    private ExportedSegment startSegment(long fromOffset, boolean registeredOnly) {
        var floor = segments.floorEntry(fromOffset);
        while (registeredOnly && floor != null && floor.getValue().registered == null) {
            floor = segments.lowerEntry(floor.getKey()); // At or above the high watermark: nothing to read there yet.
        }
        Long empty = emptySegments.floor(fromOffset);
        if (empty != null && (floor == null || empty > floor.getKey())) {
            var next = segments.higherEntry(empty);
            return next == null || (registeredOnly && next.getValue().registered == null) ? null : next.getValue();
        }
        return floor == null ? null : floor.getValue();
    }

    /** Answers a directory request from {@code requested}: an offset, or the log start or high watermark published now. */
    synchronized SegmentDirectory.Response directory(long requested) {
        long fromOffset = SegmentDirectory.Request.resolve(requested, published);
        ExportedSegment first = fromOffset < 0 ? null : startSegment(fromOffset, true);
        if (first == null || published == null) {
            return new SegmentDirectory.Response(SegmentDirectory.Status.OFFSET_NOT_EXPORTED, watermarkRegion.descriptor(), -1, List.of());
        }
        long limit = first.baseOffset == published.hwSegmentBase() ? Math.min(published.hwPosition(), first.exportedLength())
                : first.baseOffset < published.hwSegmentBase() ? first.exportedLength() : 0;
        // The batch holding fromOffset: walk past every batch that ends below it.
        long start = BatchHeaders.walk(first.memory, 0, first.baseOffset, limit, fromOffset).bytePosition();
        List<SegmentDirectory.Segment> out = new ArrayList<>();
        for (ExportedSegment s : segments.tailMap(first.baseOffset, true).values()) {
            if (out.size() == SegmentDirectory.MAX_SEGMENTS_PER_RESPONSE || s.registered == null) {
                break; // Later segments lie above the high watermark.
            }
            // Complete for a consumer only once registered in full: until then it is registered again as the HW moves.
            out.add(new SegmentDirectory.Segment(s.baseOffset, s.exportedLength(), s.complete && s.exportedLength() == s.mappedLength,
                    s.registered.region().descriptor()));
        }
        return new SegmentDirectory.Response(SegmentDirectory.Status.OK, watermarkRegion.descriptor(), start, out, published);
    }

    /**
     * The segments whose transaction indexes may list aborted transactions overlapping a range from
     * {@code fromOffset}: the one holding it and every later one. Empty when {@code fromOffset} is not exported
     * (below the log start, or before any exported segment).
     */
    synchronized List<TransactionIndexScanner.Segment> transactionIndexSegments(long fromOffset) {
        ExportedSegment first = startSegment(fromOffset, false);
        if (first == null || published == null || fromOffset < published.logStartOffset()) {
            return List.of();
        }
        List<TransactionIndexScanner.Segment> out = new ArrayList<>();
        for (ExportedSegment s : segments.tailMap(first.baseOffset, true).values()) {
            out.add(new TransactionIndexScanner.Segment(s.baseOffset, s.file, s.fileKey));
        }
        return out;
    }

    private ExportedSegment map(long base, Path file, boolean complete) throws IOException {
        try {
            Object key = fileKey(file);
            // The mapping ends at the size measured now: a peer can never touch a page past the end of file.
            long size = Files.size(file);
            if (size == 0) {
                return null; // A fresh active segment: mapped once it has data.
            }
            Arena arena = Arena.ofShared();
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
                // Only the exporter reads this mapping; what peers read is registered in registerBelow.
                return new ExportedSegment(base, file, key, arena, channel.map(FileChannel.MapMode.READ_ONLY, 0, size, arena), size,
                        null, complete);
            } catch (IOException | RuntimeException e) {
                arena.close();
                throw e;
            }
        } catch (NoSuchFileException gone) {
            return null; // deleted meanwhile (retention, compaction)
        }
    }

    /**
     * Registers for peers what lies below the high watermark: every segment before {@code hwSegmentBase} in full, that
     * one up to {@code hwPosition}, none after it. Returns whether a registration changed (the directory then differs).
     */
    private boolean registerBelow(long hwSegmentBase, long hwPosition) throws IOException {
        boolean changed = false;
        for (ExportedSegment s : List.copyOf(segments.values())) {
            long wanted = s.baseOffset < hwSegmentBase ? s.mappedLength : s.baseOffset == hwSegmentBase ? hwPosition : 0;
            if (wanted == s.exportedLength()) {
                continue;
            }
            Registered fresh = null;
            if (wanted > 0) {
                Arena arena = Arena.ofShared();
                try {
                    fresh = new Registered(mapper.register(transport, s.file, wanted, arena), arena);
                } catch (RegisteredMemoryLimitException e) {
                    arena.close();
                    // The watermark stays where it was: consumers read up to it, then Kafka's fetch serves them.
                    throw new IOException("cannot register " + wanted + " bytes of segment " + s.baseOffset + " of " + partition
                            + ", so its watermark is not refreshed: " + e.getMessage(), e);
                } catch (RuntimeException e) {
                    arena.close();
                    throw new IOException("cannot register " + wanted + " bytes of segment " + s.baseOffset + " of " + partition
                            + " (deleted or truncated meanwhile?): " + e.getMessage(), e);
                }
            }
            if (s.registered != null) {
                retirer.retire(s.registered.region(), s.registered.arena());
            }
            remaps++;
            replace(s, s.registeredAs(fresh));
            changed = true;
        }
        return changed;
    }

    private void replace(ExportedSegment old, ExportedSegment fresh) {
        segments.put(fresh.baseOffset, fresh);
        if (scanSegment == old) {
            scanSegment = fresh;
        }
    }

    private static boolean isTruncated(ExportedSegment s, long sizeOnDisk) {
        return sizeOnDisk >= 0 && sizeOnDisk < s.mappedLength;
    }

    /**
     * The last segment cut back in place (a follower truncating its log after a leader change): past the new end
     * the old mapping would fault, or on a NIC that pinned its pages serve bytes the log no longer holds, so it is
     * retired and the file mapped again at its new length, as the active segment it now is (it grows again);
     * null when nothing is left of it.
     */
    private ExportedSegment truncated(ExportedSegment old) throws IOException {
        LOG.warn("segment {} of {} was truncated in place below its {} mapped bytes; exporting what is left",
                old.baseOffset, partition, old.mappedLength);
        ExportedSegment fresh = map(old.baseOffset, old.file, false);
        retire(old); // Registered again, at most to the new end, by the next publish.
        return fresh;
    }

    /** Maps the grown or rolled file again for the exporter's walks; its registration stays until publish moves it. */
    private ExportedSegment remap(ExportedSegment old, boolean complete) throws IOException {
        ExportedSegment mapped = map(old.baseOffset, old.file, complete);
        if (mapped == null) {
            return old;
        }
        ExportedSegment fresh = mapped.registeredAs(old.registered);
        replace(old, fresh);
        old.arena.close(); // Only this exporter's walks used it, under this lock.
        return fresh;
    }

    private void retire(ExportedSegment s) {
        if (scanSegment == s) {
            scanSegment = null;
            scanPosition = null;
        }
        if (s.registered != null) {
            retirer.retire(s.registered.region(), s.registered.arena());
        }
        s.arena.close();
    }

    private static long size(Path file) {
        try {
            return Files.size(file);
        } catch (IOException e) {
            return -1;
        }
    }

    static Object fileKey(Path file) {
        try {
            return Files.readAttributes(file, BasicFileAttributes.class).fileKey();
        } catch (IOException e) {
            return null;
        }
    }

    synchronized int segmentCount() {
        return segments.size();
    }

    @Override
    public synchronized void close() {
        for (ExportedSegment s : segments.values()) {
            if (s.registered != null) {
                s.registered.region().close();
                s.registered.arena().close();
            }
            s.arena.close();
        }
        segments.clear();
        watermarkRegion.close();
        watermarkArena.close();
    }

    /**
     * @param arena      owns {@code memory}, the exporter's own mapping of the first {@code mappedLength} bytes
     * @param registered what peers may read, or null while nothing of the segment lies below the high watermark
     */
    private record ExportedSegment(long baseOffset, Path file, Object fileKey, Arena arena, MemorySegment memory, long mappedLength,
                                   Registered registered, boolean complete) {
        long exportedLength() {
            return registered == null ? 0 : registered.region().segment().byteSize();
        }

        ExportedSegment registeredAs(Registered r) {
            return new ExportedSegment(baseOffset, file, fileKey, arena, memory, mappedLength, r, complete);
        }
    }

    private record Registered(RegisteredRegion region, Arena arena) {
    }
}
