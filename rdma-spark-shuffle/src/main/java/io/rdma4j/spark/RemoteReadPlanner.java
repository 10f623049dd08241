package io.rdma4j.spark;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegistrationException;
import io.rdma4j.core.pool.PooledBuffer;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Plans which bytes a reduce task reads from one remote peer, on a planning thread: asks the peer for the regions of
 * its map outputs, reads the wanted partitions' index (and checksum) entries of every map output in one round of
 * one-sided READs, makes each map output's wanted blocks one byte range of its data file (adjacent partitions are one
 * read), and batches small ranges of the peer into one pooled buffer of about the target request size.
 */
final class RemoteReadPlanner {

    /** The blocks of one map output on a peer: one contiguous byte range of its data file. */
    record MapRange(BlockManagerId peer, long mapId, int mapIndex, RegionDescriptor data, long start, long length,
                    List<ShuffleBlockId> blocks, long[] blockOffsets, long[] blockLengths, long[] checksums) {

        /** The checksum of a block whose map task wrote none. */
        static final long NO_CHECKSUM = Long.MIN_VALUE;

        /** Block {@code i}'s bytes in {@code rangeBytes}, where this range was read to. */
        ByteBuffer block(MemorySegment rangeBytes, int i) {
            return rangeBytes.asSlice(blockOffsets[i], blockLengths[i]).asByteBuffer();
        }
    }

    /** Map ranges of one peer read together into one pooled buffer. */
    record Batch(String executorId, RdmaConnection connection, List<MapRange> ranges, long bytes) { }

    /**
     * Why a peer's planning failed; the task thread makes it a fetch failure ({@link FetchFailures}), or with
     * {@code viaSpark} (a registered-memory limit: the peer cannot register its files, or this executor a buffer for
     * the peer's index entries) fetches the peer's blocks through Spark, counted under that reason.
     */
    record PlanFailure(BlockManagerId peer, WantedBlock wanted, String message, Throwable cause,
                       RdmaShuffleMetrics.FallbackReason viaSpark) {
        PlanFailure(BlockManagerId peer, WantedBlock wanted, String message, Throwable cause) {
            this(peer, wanted, message, cause, null);
        }
    }

    /** Planning of one peer failed in a way Spark must hear as a fetch failure. */
    static final class PlanningFailed extends Exception {
        final transient PlanFailure failure;

        PlanningFailed(PlanFailure failure) {
            super(failure.message(), null, false, false);
            this.failure = failure;
        }
    }

    /**
     * One map output's index (and checksum) entries for partitions {@code minReduce} to {@code maxReduce}, read to
     * {@code indexAt} (and {@code checksumAt}, or -1 without checksums) of the planning's metadata buffer.
     */
    private record IndexSpan(List<WantedBlock> blocks, DescribeMapOutputs.MapOutput output, int minReduce, int maxReduce,
                             long indexAt, long checksumAt) { }

    private final ExecutorRuntime runtime;
    private final int shuffleId;

    RemoteReadPlanner(ExecutorRuntime runtime, int shuffleId) {
        this.runtime = runtime;
        this.shuffleId = shuffleId;
    }

    /** The batches that read {@code wanted}'s non-empty blocks from {@code peer} over {@code connection}. */
    List<Batch> batchesFrom(BlockManagerId peer, RdmaConnection connection, List<WantedBlock> wanted) throws PlanningFailed {
        String peerId = peer.executorId();
        Map<Long, List<WantedBlock>> byMap = WantedBlock.byMap(wanted);
        Map<Long, DescribeMapOutputs.MapOutput> outputs;
        try {
            outputs = runtime.describe(peerId, connection, shuffleId, new ArrayList<>(byMap.keySet()));
        } catch (Exception e) {
            runtime.forget(peerId, connection);
            throw new PlanningFailed(new PlanFailure(peer, wanted.getFirst(), "cannot describe map outputs on executor " + peerId + ": " + e, e));
        }
        for (DescribeMapOutputs.MapOutput output : outputs.values()) {
            if (output.notServed()) {
                throw new PlanningFailed(new PlanFailure(peer, wanted.getFirst(), "executor " + peerId + " cannot register map "
                        + output.mapId() + " of shuffle " + shuffleId + " for RDMA reads (its log says why)", null,
                        RdmaShuffleMetrics.FallbackReason.NOT_SERVED));
            }
        }
        List<IndexSpan> spans = new ArrayList<>();
        long metaBytes = 0;
        for (List<WantedBlock> blocks : byMap.values()) {
            WantedBlock first = blocks.getFirst();
            DescribeMapOutputs.MapOutput output = outputs.get(first.blockId().mapId());
            if (output == null || !output.present()) {
                throw new PlanningFailed(new PlanFailure(peer, first, "executor " + peerId + " no longer has this map output", null));
            }
            if (output.data() == null) {
                continue; // every partition of this map output is empty
            }
            int min = blocks.stream().mapToInt(w -> w.blockId().reduceId()).min().orElseThrow();
            int max = blocks.stream().mapToInt(w -> w.blockId().reduceId()).max().orElseThrow();
            long indexAt = metaBytes;
            metaBytes += ShuffleIndexFormat.indexBytes(min, max);
            long checksumAt = -1;
            if (output.checksums() != null) {
                checksumAt = metaBytes;
                metaBytes += ShuffleIndexFormat.checksumBytes(min, max);
            }
            spans.add(new IndexSpan(blocks, output, min, max, indexAt, checksumAt));
        }
        if (spans.isEmpty()) {
            return new ArrayList<>();
        }
        List<MapRange> ranges = new ArrayList<>();
        PooledBuffer metaBuffer;
        try {
            metaBuffer = runtime.pool.acquire(metaBytes);
        } catch (RegistrationException e) { // nothing of this peer's is read yet: Spark reads it all
            throw new PlanningFailed(new PlanFailure(peer, wanted.getFirst(), "this executor cannot register a buffer to read "
                    + "executor " + peerId + "'s index entries into: " + e.getMessage(), e, RdmaShuffleMetrics.FallbackReason.NO_READ_BUFFER));
        }
        try (metaBuffer) {
            MemorySegment sink = metaBuffer.segment();
            readIndexEntries(peer, connection, wanted, spans, sink);
            for (IndexSpan span : spans) {
                int partitions = span.maxReduce() - span.minReduce() + 1;
                long[] entries = ShuffleIndexFormat.entries(sink, span.indexAt(), partitions + 1);
                try {
                    ShuffleIndexFormat.checkEntries(entries, span.output().data().length());
                } catch (ProtocolException e) {
                    runtime.forget(peerId, connection);
                    throw new PlanningFailed(new PlanFailure(peer, span.blocks().getFirst(), "executor " + peerId
                            + " published a corrupt index for map " + span.output().mapId() + ": " + e.getMessage(), e));
                }
                long[] checksums = span.checksumAt() < 0 ? null : ShuffleIndexFormat.entries(sink, span.checksumAt(), partitions);
                ranges.addAll(mapRanges(peer, span.blocks(), span.output().data(), span.minReduce(), entries, checksums,
                        runtime.conf.targetRequestSize()));
            }
        }
        return batches(peerId, connection, ranges, runtime.conf.targetRequestSize());
    }

    /** One round of READs of every span's index (and checksum) entries into {@code sink}. */
    private void readIndexEntries(BlockManagerId peer, RdmaConnection connection, List<WantedBlock> wanted,
                                  List<IndexSpan> spans, MemorySegment sink) throws PlanningFailed {
        String peerId = peer.executorId();
        List<ReadRequest> reads = new ArrayList<>();
        for (IndexSpan span : spans) {
            long from = ShuffleIndexFormat.entryOffset(span.minReduce());
            reads.add(new ReadRequest(span.output().index(), from,
                    sink.asSlice(span.indexAt(), ShuffleIndexFormat.indexBytes(span.minReduce(), span.maxReduce()))));
            if (span.checksumAt() >= 0) {
                reads.add(new ReadRequest(span.output().checksums(), from,
                        sink.asSlice(span.checksumAt(), ShuffleIndexFormat.checksumBytes(span.minReduce(), span.maxReduce()))));
            }
        }
        try {
            connection.readAll(reads).get(runtime.conf.transport().operationTimeout().toMillis() + 1000, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new PlanningFailed(new PlanFailure(peer, wanted.getFirst(), "interrupted while reading index entries from executor " + peerId, e));
        } catch (Exception e) {
            runtime.forget(peerId, connection);
            throw new PlanningFailed(new PlanFailure(peer, wanted.getFirst(),
                    "one-sided read of map output index entries from executor " + peerId + " failed: " + e, e));
        }
    }

    /**
     * The byte range of one map output's data file that holds {@code blocks} (of partitions {@code minReduce} on),
     * from the index entries that bound those partitions and their {@code checksums} (null where the map task wrote
     * none); null when every one of the blocks is empty.
     */
    static MapRange mapRange(BlockManagerId peer, List<WantedBlock> blocks, RegionDescriptor data, int minReduce,
                             long[] entries, long[] checksums) {
        return mapRange(peer, blocks, data, minReduce, entries, checksums, entries[0], entries[entries.length - 1]);
    }

    /**
     * As {@link #mapRange}, split where the range would exceed {@code target} bytes (a block larger than that is a
     * range of its own): a reducer given many partitions of one map output (AQE's local shuffle reader, a coalesced
     * range) then holds about {@code target} bytes per READ rather than the whole output.
     */
    static List<MapRange> mapRanges(BlockManagerId peer, List<WantedBlock> blocks, RegionDescriptor data, int minReduce,
                                    long[] entries, long[] checksums, long target) {
        if (entries[entries.length - 1] - entries[0] <= target) {
            MapRange whole = mapRange(peer, blocks, data, minReduce, entries, checksums);
            return whole == null ? List.of() : List.of(whole);
        }
        List<WantedBlock> inFileOrder = blocks.stream()
                .sorted(java.util.Comparator.comparingInt(w -> w.blockId().reduceId())).toList();
        List<MapRange> out = new ArrayList<>();
        List<WantedBlock> window = new ArrayList<>();
        long windowStart = 0;
        long windowEnd = 0;
        for (WantedBlock w : inFileOrder) {
            int r = w.blockId().reduceId() - minReduce;
            if (entries[r + 1] == entries[r]) {
                continue;
            }
            if (!window.isEmpty() && entries[r + 1] - windowStart > target) {
                out.add(mapRange(peer, window, data, minReduce, entries, checksums, windowStart, windowEnd));
                window = new ArrayList<>();
            }
            if (window.isEmpty()) {
                windowStart = entries[r];
            }
            window.add(w);
            windowEnd = entries[r + 1];
        }
        if (!window.isEmpty()) {
            out.add(mapRange(peer, window, data, minReduce, entries, checksums, windowStart, windowEnd));
        }
        return out;
    }

    /** The range from byte {@code start} to {@code end} of the data file, holding the non-empty ones of {@code blocks}. */
    private static MapRange mapRange(BlockManagerId peer, List<WantedBlock> blocks, RegionDescriptor data, int minReduce,
                                     long[] entries, long[] checksums, long start, long end) {
        List<ShuffleBlockId> ids = new ArrayList<>();
        List<long[]> parts = new ArrayList<>();
        for (WantedBlock w : blocks) {
            int r = w.blockId().reduceId() - minReduce;
            long off = entries[r];
            long len = entries[r + 1] - off;
            if (len == 0) {
                continue;
            }
            long checksum = checksums != null ? checksums[r] : MapRange.NO_CHECKSUM;
            ids.add(w.blockId());
            parts.add(new long[] {off - start, len, checksum});
        }
        if (ids.isEmpty()) {
            return null;
        }
        WantedBlock first = blocks.getFirst();
        return new MapRange(peer, first.blockId().mapId(), first.mapIndex(), data, start, end - start, ids,
                parts.stream().mapToLong(a -> a[0]).toArray(), parts.stream().mapToLong(a -> a[1]).toArray(),
                parts.stream().mapToLong(a -> a[2]).toArray());
    }

    /**
     * One peer's map ranges in order, merged into batches of about {@code target} bytes: a range joins the batch
     * before it unless that would exceed the target; a range larger than the target is a batch of its own.
     */
    static List<Batch> batches(String peerId, RdmaConnection connection, List<MapRange> ranges, long target) {
        List<Batch> batches = new ArrayList<>();
        List<MapRange> current = new ArrayList<>();
        long currentBytes = 0;
        for (MapRange range : ranges) {
            if (!current.isEmpty() && currentBytes + range.length() > target) {
                batches.add(new Batch(peerId, connection, current, currentBytes));
                current = new ArrayList<>();
                currentBytes = 0;
            }
            current.add(range);
            currentBytes += range.length();
        }
        if (!current.isEmpty()) {
            batches.add(new Batch(peerId, connection, current, currentBytes));
        }
        return batches;
    }
}
