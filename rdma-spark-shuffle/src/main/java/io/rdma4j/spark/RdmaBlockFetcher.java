package io.rdma4j.spark;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.pool.PooledBuffer;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import scala.Tuple2;

import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Yields the blocks a reduce task needs as streams over native memory. Local map outputs are read from
 * this executor's own mapped files, those of other executors on this host from their files
 * ({@link HostLocalMapOutputs}, with {@code spark.shuffle.readHostLocalDisk}); remote ones by one-sided RDMA READ: first the needed index (and
 * checksum) entries of every map output, then each map output's byte range for the requested partitions
 * (adjacent partitions of one map output are one read; small map outputs are batched into one pooled
 * buffer), with at most {@code max-bytes-in-flight} requested and not yet consumed.
 *
 * <p>Each remote peer is planned (describe, index reads) on its own virtual thread while the task consumes
 * its local blocks, as Spark's fetcher sends its remote requests before reading local blocks: the round
 * trips overlap with work instead of adding to the fetch wait.
 */
final class RdmaBlockFetcher implements Iterator<Tuple2<BlockId, InputStream>> {

    private static final long NO_CHECKSUM = Long.MIN_VALUE;

    /** One block as Spark asked for it. */
    record Wanted(ShuffleBlockId blockId, int mapIndex) { }

    /** A block ready to be consumed. */
    private record Ready(ShuffleBlockId blockId, ByteBuffer bytes, SharedBuffer owner, boolean remote) { }

    /** The blocks of one map output on a peer: one contiguous byte range of its data file. */
    private record MapRange(BlockManagerId peer, long mapId, int mapIndex, RegionDescriptor data, long start, long length,
                            List<ShuffleBlockId> blocks, long[] blockOffsets, long[] blockLengths, long[] checksums) { }

    /** Map ranges of one peer read together into one pooled buffer. */
    private record Batch(String executorId, RdmaConnection connection, List<MapRange> ranges, long bytes) { }

    /** What the task thread takes from {@link #arrivals}. */
    private sealed interface Arrival permits Completed, Planned { }

    /** One map range's read into its slice of the batch's shared buffer, finished. */
    private record Completed(Batch batch, MapRange range, MemorySegment bytes, SharedBuffer shared, Throwable failure) implements Arrival { }

    /**
     * One peer's planning finished: its batches are queued, or it failed ({@code failure} non-null). The task
     * thread builds the FetchFailedException, since Spark ties it to the TaskContext of the constructing thread.
     */
    private record Planned(PlanFailure failure) implements Arrival { }

    private record PlanFailure(BlockManagerId peer, Wanted wanted, String message, Throwable cause) { }

    /** Planning of one peer failed in a way Spark must hear as a fetch failure. */
    private static final class PlanningFailed extends Exception {
        final transient PlanFailure failure;

        PlanningFailed(PlanFailure failure) {
            super(failure.message(), null, false, false);
            this.failure = failure;
        }
    }

    private final ExecutorRuntime runtime;
    private final int shuffleId;
    private final TaskContext context;
    private final ShuffleReadMetricsReporter metrics;
    private final SerializerManager serializerManager;
    private final ArrayDeque<Ready> ready = new ArrayDeque<>();
    private final ArrayDeque<Batch> pending = new ArrayDeque<>();
    private final LinkedBlockingQueue<Arrival> arrivals = new LinkedBlockingQueue<>();
    private final List<SharedBuffer> handedOut = new ArrayList<>();
    /** The peer connections this task reads from: an idle close waits until the task ends. */
    private final Queue<PeerConnections.Lease> leases = new ConcurrentLinkedQueue<>();
    /** Reads issued and not yet taken. */
    private int outstanding;
    /** Peers whose planning has not been taken yet. */
    private int planning;
    private long bytesInFlight;
    private boolean closed;
    /** Maps the files of executors on this host; created by the first such peer. */
    private HostLocalMapOutputs hostLocal;

    RdmaBlockFetcher(ExecutorRuntime runtime, int shuffleId, TaskContext context, ShuffleReadMetricsReporter metrics,
                     SerializerManager serializerManager) {
        this.runtime = runtime;
        this.shuffleId = shuffleId;
        this.context = context;
        this.metrics = metrics;
        this.serializerManager = serializerManager;
    }

    /**
     * Connects to every remote peer, starts planning them in the background, then plans the local blocks.
     * PeerUnreachableException (thrown before anything was handed out) lets the caller fall back.
     */
    void start(List<Tuple2<BlockManagerId, List<Wanted>>> blocksByAddress) throws PeerUnreachableException {
        List<Runnable> remotePlans = new ArrayList<>();
        // Connecting is waiting for a remote peer, so it counts as fetch wait (as Spark counts it).
        long startNanos = System.nanoTime();
        for (Tuple2<BlockManagerId, List<Wanted>> group : blocksByAddress) {
            BlockManagerId peer = group._1();
            if (!peer.executorId().equals(runtime.executorId) && !readHostLocal(peer, group._2())) {
                PeerConnections.Lease lease = runtime.connection(peer.executorId());
                leases.add(lease);
                remotePlans.add(() -> planRemote(peer, lease.connection(), group._2()));
            }
        }
        metrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos));
        synchronized (this) {
            planning = remotePlans.size();
        }
        for (int i = 0; i < remotePlans.size(); i++) {
            Thread.ofVirtual().name("rdma4j-shuffle-plan-" + context.taskAttemptId() + "-" + i).start(remotePlans.get(i));
        }
        for (Tuple2<BlockManagerId, List<Wanted>> group : blocksByAddress) {
            if (group._1().executorId().equals(runtime.executorId)) {
                planLocal(group._1(), group._2());
            }
        }
    }

    /**
     * Reads {@code peer}'s blocks from its files when it runs on this host (Spark's default); false when it does not,
     * or its files cannot be read (they are then read through the transport).
     */
    private boolean readHostLocal(BlockManagerId peer, List<Wanted> wanted) {
        List<String> dirs = runtime.hostLocalDirs(peer);
        if (dirs == null) {
            return false;
        }
        if (hostLocal == null) {
            hostLocal = new HostLocalMapOutputs(shuffleId, runtime.subDirsPerLocalDir);
        }
        List<HostLocalMapOutputs.Block> blocks = hostLocal.readOrNull(peer.executorId(), dirs, wanted);
        if (blocks == null) {
            return false;
        }
        blocks.forEach(b -> ready.add(new Ready(b.blockId(), b.bytes(), null, false)));
        RdmaShuffleMetrics.HOST_LOCAL_BLOCKS.inc(blocks.size());
        return true;
    }

    /** The wanted blocks grouped by map output, in the order first asked. */
    static Map<Long, List<Wanted>> byMap(List<Wanted> wanted) {
        Map<Long, List<Wanted>> byMap = new LinkedHashMap<>();
        for (Wanted w : wanted) {
            byMap.computeIfAbsent(w.blockId().mapId(), k -> new ArrayList<>()).add(w);
        }
        return byMap;
    }

    private void planLocal(BlockManagerId self, List<Wanted> wanted) {
        for (List<Wanted> blocks : byMap(wanted).values()) {
            Wanted first = blocks.getFirst();
            MapOutputPublisher.Published p = runtime.publisher.publish(shuffleId, first.blockId().mapId());
            if (p == null) {
                throw fetchFailed(self, first, "the map output's files are missing on this executor", null);
            }
            for (Wanted w : blocks) {
                int reduceId = w.blockId().reduceId();
                long offset = ShuffleIndexFormat.entry(p.index(), ShuffleIndexFormat.entryOffset(reduceId), 0);
                long length = ShuffleIndexFormat.entry(p.index(), ShuffleIndexFormat.entryOffset(reduceId), 1) - offset;
                if (length == 0) {
                    continue;
                }
                ByteBuffer bytes = p.data().asSlice(offset, length).asByteBuffer();
                if (p.checksums() != null) {
                    verifyOrFail(self, w, bytes, ShuffleIndexFormat.entry(p.checksums(), ShuffleIndexFormat.entryOffset(reduceId), 0));
                }
                ready.add(new Ready(w.blockId(), bytes, null, false));
            }
        }
    }

    /** On a planning thread: plans one peer's reads, queues them, then reports to the task thread. */
    private void planRemote(BlockManagerId peer, RdmaConnection connection, List<Wanted> wanted) {
        PlanFailure failure = null;
        try {
            List<Batch> batches = batchesFrom(peer, connection, wanted);
            synchronized (this) {
                if (!closed) {
                    pending.addAll(batches);
                }
            }
            issueMore();
        } catch (PlanningFailed e) {
            failure = e.failure;
        } catch (RuntimeException | Error e) {
            failure = new PlanFailure(peer, wanted.getFirst(), "planning reads from executor " + peer.executorId() + " failed: " + e, e);
        }
        arrivals.add(new Planned(failure));
    }

    private List<Batch> batchesFrom(BlockManagerId peer, RdmaConnection connection, List<Wanted> wanted) throws PlanningFailed {
        String peerId = peer.executorId();
        Map<Long, List<Wanted>> byMap = byMap(wanted);
        Map<Long, DescribeMapOutputs.MapOutput> outputs;
        try {
            outputs = runtime.describe(peerId, connection, shuffleId, new ArrayList<>(byMap.keySet()));
        } catch (Exception e) {
            runtime.forget(peerId, connection);
            throw new PlanningFailed(new PlanFailure(peer, wanted.getFirst(), "cannot describe map outputs on executor " + peerId + ": " + e, e));
        }
        // One read of every map output's index (and checksum) entries for the requested partitions.
        List<ReadRequest> metaReads = new ArrayList<>();
        record Meta(List<Wanted> blocks, DescribeMapOutputs.MapOutput output, int minReduce, int maxReduce, long indexAt, long checksumAt) { }
        List<Meta> metas = new ArrayList<>();
        long metaBytes = 0;
        for (List<Wanted> blocks : byMap.values()) {
            Wanted first = blocks.getFirst();
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
            metas.add(new Meta(blocks, output, min, max, indexAt, checksumAt));
        }
        List<Batch> batches = new ArrayList<>();
        if (metas.isEmpty()) {
            return batches;
        }
        List<MapRange> ranges = new ArrayList<>();
        try (PooledBuffer metaBuffer = runtime.pool.acquire(metaBytes)) {
            MemorySegment sink = metaBuffer.segment();
            for (Meta m : metas) {
                long from = ShuffleIndexFormat.entryOffset(m.minReduce());
                metaReads.add(new ReadRequest(m.output().index(), from,
                        sink.asSlice(m.indexAt(), ShuffleIndexFormat.indexBytes(m.minReduce(), m.maxReduce()))));
                if (m.checksumAt() >= 0) {
                    metaReads.add(new ReadRequest(m.output().checksums(), from,
                            sink.asSlice(m.checksumAt(), ShuffleIndexFormat.checksumBytes(m.minReduce(), m.maxReduce()))));
                }
            }
            try {
                connection.readAll(metaReads).get(runtime.conf.transport().operationTimeout().toMillis() + 1000, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new PlanningFailed(new PlanFailure(peer, wanted.getFirst(), "interrupted while reading index entries from executor " + peerId, e));
            } catch (Exception e) {
                runtime.forget(peerId, connection);
                throw new PlanningFailed(new PlanFailure(peer, wanted.getFirst(),
                        "one-sided read of map output index entries from executor " + peerId + " failed: " + e, e));
            }
            for (Meta m : metas) {
                long[] entries = ShuffleIndexFormat.entries(sink, m.indexAt(), m.maxReduce() - m.minReduce() + 2);
                try {
                    ShuffleIndexFormat.checkEntries(entries, m.output().data().length());
                } catch (ProtocolException e) {
                    runtime.forget(peerId, connection);
                    throw new PlanningFailed(new PlanFailure(peer, m.blocks().getFirst(), "executor " + peerId
                            + " published a corrupt index for map " + m.output().mapId() + ": " + e.getMessage(), e));
                }
                long start = entries[0];
                long end = entries[entries.length - 1];
                List<ShuffleBlockId> ids = new ArrayList<>();
                List<long[]> parts = new ArrayList<>();
                for (Wanted w : m.blocks()) {
                    int r = w.blockId().reduceId() - m.minReduce();
                    long off = entries[r];
                    long len = entries[r + 1] - off;
                    if (len == 0) {
                        continue;
                    }
                    long checksum = m.checksumAt() >= 0 ? ShuffleIndexFormat.entry(sink, m.checksumAt(), r) : NO_CHECKSUM;
                    ids.add(w.blockId());
                    parts.add(new long[] {off - start, len, checksum});
                }
                if (ids.isEmpty()) {
                    continue;
                }
                ranges.add(new MapRange(peer, m.blocks().getFirst().blockId().mapId(), m.blocks().getFirst().mapIndex(), m.output().data(),
                        start, end - start, ids, parts.stream().mapToLong(a -> a[0]).toArray(),
                        parts.stream().mapToLong(a -> a[1]).toArray(), parts.stream().mapToLong(a -> a[2]).toArray()));
            }
        }
        // Merge small map outputs of this peer into batches of about the target request size.
        long target = runtime.conf.targetRequestSize();
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

    /**
     * Issues batches while the bytes in flight allow. Each map range of a batch is its own read into its
     * slice of the batch's buffer, so a range's blocks are handed to Spark as soon as that range arrived
     * (as Spark's fetcher hands out each block), not when the whole batch did.
     */
    private synchronized void issueMore() {
        while (!closed && !pending.isEmpty()
                && (bytesInFlight == 0 || bytesInFlight + pending.peek().bytes() <= runtime.conf.maxBytesInFlight())) {
            Batch batch = pending.poll();
            bytesInFlight += batch.bytes();
            outstanding += batch.ranges().size();
            int blockCount = batch.ranges().stream().mapToInt(r -> r.blocks().size()).sum();
            SharedBuffer shared = new SharedBuffer(runtime.pool.acquire(batch.bytes()), batch.ranges().size(), blockCount);
            handedOut.add(shared);
            MemorySegment buffer = shared.segment();
            long at = 0;
            for (MapRange range : batch.ranges()) {
                MemorySegment slice = buffer.asSlice(at, range.length());
                batch.connection().read(range.data(), range.start(), slice)
                        .whenComplete((ok, failure) -> arrived(new Completed(batch, range, slice, shared, failure)));
                at += range.length();
            }
        }
    }

    private void arrived(Completed result) {
        synchronized (this) {
            if (!closed) {
                arrivals.add(result);
                return;
            }
        }
        result.shared().readFinished();
    }

    /** May wait: whether more blocks come is known only once every peer's planning is taken. */
    @Override
    public boolean hasNext() {
        while (ready.isEmpty()) {
            synchronized (this) {
                if (pending.isEmpty() && outstanding == 0 && planning == 0) {
                    return false;
                }
            }
            takeArrival();
        }
        return true;
    }

    @Override
    public Tuple2<BlockId, InputStream> next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        Ready block = ready.poll();
        if (block.remote()) {
            metrics.incRemoteBlocksFetched(1);
            RdmaShuffleMetrics.BLOCKS_FETCHED.inc();
            metrics.incRemoteBytesRead(block.bytes().remaining());
        } else {
            metrics.incLocalBlocksFetched(1);
            metrics.incLocalBytesRead(block.bytes().remaining());
        }
        InputStream raw = new SegmentInputStream(block.bytes(), block.owner());
        return new Tuple2<>(block.blockId(), serializerManager.wrapStream(block.blockId(), raw));
    }

    /** Task thread: waits for the next finished read or planning (the wait is fetch wait) and takes it. */
    private void takeArrival() {
        long startNanos = System.nanoTime();
        Arrival arrival;
        try {
            arrival = arrivals.take();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for shuffle blocks", e);
        }
        metrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos));
        switch (arrival) {
            case Completed completed -> takeCompleted(completed);
            case Planned planned -> {
                synchronized (this) {
                    planning--;
                }
                PlanFailure f = planned.failure();
                if (f != null) {
                    throw fetchFailed(f.peer(), f.wanted(), f.message(), f.cause());
                }
            }
        }
    }

    private void takeCompleted(Completed result) {
        Batch batch = result.batch();
        MapRange range = result.range();
        synchronized (this) {
            outstanding--;
            bytesInFlight -= range.length();
        }
        issueMore();
        try {
            if (result.failure() != null) {
                runtime.forget(batch.executorId(), batch.connection());
                throw fetchFailed(range.peer(), new Wanted(range.blocks().getFirst(), range.mapIndex()),
                        "one-sided read of shuffle blocks from executor " + batch.executorId() + " failed: " + result.failure(), result.failure());
            }
            MemorySegment rangeBytes = result.bytes();
            for (int i = 0; i < range.blocks().size(); i++) {
                ByteBuffer bytes = rangeBytes.asSlice(range.blockOffsets()[i], range.blockLengths()[i]).asByteBuffer();
                long expected = range.checksums()[i];
                if (expected != NO_CHECKSUM && checksum(bytes) != expected) {
                    rereadOnce(batch, range, rangeBytes, i);
                }
                ready.add(new Ready(range.blocks().get(i), bytes, result.shared(), true));
            }
        } finally {
            // a failure ends the task: cleanup() abandons the blocks; the finished read lets go here
            result.shared().readFinished();
        }
    }

    /** A checksum mismatch may be a transfer error: read the range once more, then give up with FetchFailed. */
    private void rereadOnce(Batch batch, MapRange range, MemorySegment rangeBytes, int blockIndex) {
        Wanted wanted = new Wanted(range.blocks().get(blockIndex), range.mapIndex());
        try {
            batch.connection().read(range.data(), range.start(), rangeBytes)
                    .get(runtime.conf.transport().operationTimeout().toMillis() + 1000, TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            throw fetchFailed(range.peer(), wanted, "re-reading a corrupted block from executor " + batch.executorId() + " failed: " + e, e);
        }
        ByteBuffer again = rangeBytes.asSlice(range.blockOffsets()[blockIndex], range.blockLengths()[blockIndex]).asByteBuffer();
        if (checksum(again) != range.checksums()[blockIndex]) {
            throw fetchFailed(range.peer(), wanted, "block " + wanted.blockId() + " from executor " + batch.executorId()
                    + " is corrupted: its " + runtime.conf.checksumAlgorithm() + " checksum does not match the one the map task wrote", null);
        }
    }

    private void verifyOrFail(BlockManagerId where, Wanted wanted, ByteBuffer bytes, long expected) {
        if (checksum(bytes) != expected) {
            throw fetchFailed(where, wanted, "local block " + wanted.blockId() + " is corrupted: its "
                    + runtime.conf.checksumAlgorithm() + " checksum does not match the one the map task wrote", null);
        }
    }

    private long checksum(ByteBuffer bytes) {
        return BlockChecksum.of(runtime.conf.checksumAlgorithm(), bytes);
    }

    private RuntimeException fetchFailed(BlockManagerId where, Wanted wanted, String message, Throwable cause) {
        ShuffleBlockId id = wanted.blockId();
        return sneaky(new FetchFailedException(where, shuffleId, id.mapId(), wanted.mapIndex(), id.reduceId(),
                "rdma4j shuffle: " + message, cause));
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable t) throws E {
        throw (E) t;
    }

    /** Gives every buffer and peer connection back; called when the task ends, however it ends. */
    void cleanup() {
        List<SharedBuffer> toRelease;
        synchronized (this) {
            closed = true;
            pending.clear();
            toRelease = new ArrayList<>(handedOut);
            handedOut.clear();
            ready.clear();
        }
        for (PeerConnections.Lease lease; (lease = leases.poll()) != null; ) {
            lease.close();
        }
        toRelease.forEach(SharedBuffer::abandonBlocks);
        if (hostLocal != null) {
            hostLocal.close();
        }
        Arrival a;
        while ((a = arrivals.poll()) != null) {
            if (a instanceof Completed c) {
                c.shared().readFinished();
            }
        }
    }
}
