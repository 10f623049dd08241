package io.rdma4j.spark;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.spark.InFlightReads.Completed;
import io.rdma4j.spark.InFlightReads.Planned;
import io.rdma4j.spark.InFlightReads.Unbuffered;
import io.rdma4j.spark.RemoteReadPlanner.Batch;
import io.rdma4j.spark.RemoteReadPlanner.MapRange;
import io.rdma4j.spark.RemoteReadPlanner.PlanFailure;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Tuple2;

import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
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
 *
 * <p>An executor that has the files but cannot register them (its registered-memory limit) has its blocks fetched
 * through Spark's block transfer ({@link SparkBlockTransfer}), and so have the blocks this executor cannot register a
 * read buffer for, unless {@code fallback=fail}: all of them by one of Spark's fetch iterators, started once the RDMA
 * side is drained, so that Spark's in-flight limits hold for the task as a whole and the task never holds Spark's
 * bytes in flight and its own at once.
 *
 * <p>Its parts: {@link RemoteReadPlanner} (which bytes to read from a remote peer), {@link InFlightReads} (the reads
 * in flight and what arrives), {@link BlockVerifier} (checksums, one re-read) and {@link FetchFailures}.
 */
final class RdmaBlockFetcher implements Iterator<Tuple2<BlockId, InputStream>> {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaBlockFetcher.class);
    /** Executors (and why) whose blocks went through Spark, so the log says why once per executor, not once per task. */
    private static final Set<String> REPORTED_NOT_SERVED = ConcurrentHashMap.newKeySet();

    /** A block ready to be consumed. */
    private record Ready(ShuffleBlockId blockId, ByteBuffer bytes, SharedBuffer owner, boolean remote) { }

    private final ExecutorRuntime runtime;
    private final int shuffleId;
    private final TaskContext context;
    private final ShuffleReadMetricsReporter metrics;
    private final SerializerManager serializerManager;
    private final FetchFailures failures;
    private final RemoteReadPlanner planner;
    private final InFlightReads reads;
    private final BlockVerifier verifier;
    private final ArrayDeque<Ready> ready = new ArrayDeque<>();
    /** Null with {@code fallback=fail}. */
    private final SparkBlockTransfer spark;
    /** Task thread only: by executor, the blocks Spark's transfer fetches (null: all the task's of that executor). */
    private final Map<BlockManagerId, Set<BlockId>> sparkFetches = new LinkedHashMap<>();
    /** Task thread only: the blocks of {@link #sparkFetches}, once the RDMA side is drained. */
    private Iterator<Tuple2<BlockId, InputStream>> viaSpark;
    /** The peer connections this task reads from: an idle close waits until the task ends. */
    private final Queue<PeerConnections.Lease> leases = new ConcurrentLinkedQueue<>();
    /** Maps the files of executors on this host; created by the first such peer. */
    private HostLocalMapOutputs hostLocal;
    /** Task thread only: the fallback and the task's completion listener both clean up. */
    private boolean cleanedUp;

    RdmaBlockFetcher(ExecutorRuntime runtime, int shuffleId, TaskContext context, ShuffleReadMetricsReporter metrics,
                     SerializerManager serializerManager, SparkBlockTransfer spark) {
        this.runtime = runtime;
        this.spark = spark;
        this.shuffleId = shuffleId;
        this.context = context;
        this.metrics = metrics;
        this.serializerManager = serializerManager;
        this.failures = new FetchFailures(shuffleId);
        this.planner = new RemoteReadPlanner(runtime, shuffleId);
        this.reads = new InFlightReads(runtime.pool, runtime.conf.maxBytesInFlight());
        this.verifier = new BlockVerifier(runtime.conf, failures);
    }

    /**
     * Connects to every remote peer, starts planning them in the background, then plans the local blocks.
     * PeerUnreachableException (thrown before anything was handed out) lets the caller fall back.
     */
    void start(List<Tuple2<BlockManagerId, List<WantedBlock>>> blocksByAddress) throws PeerUnreachableException {
        List<Runnable> remotePlans = new ArrayList<>();
        // Connecting is waiting for a remote peer, so it counts as fetch wait (as Spark counts it).
        long startNanos = System.nanoTime();
        for (Tuple2<BlockManagerId, List<WantedBlock>> group : blocksByAddress) {
            BlockManagerId peer = group._1();
            if (!peer.executorId().equals(runtime.executorId) && !readHostLocal(peer, group._2())) {
                PeerConnections.Lease lease = runtime.connection(peer.executorId());
                leases.add(lease);
                remotePlans.add(() -> planRemote(peer, lease.connection(), group._2()));
            }
        }
        metrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos));
        reads.expectPlannings(remotePlans.size());
        for (int i = 0; i < remotePlans.size(); i++) {
            Thread.ofVirtual().name("rdma4j-shuffle-plan-" + context.taskAttemptId() + "-" + i).start(remotePlans.get(i));
        }
        for (Tuple2<BlockManagerId, List<WantedBlock>> group : blocksByAddress) {
            if (group._1().executorId().equals(runtime.executorId)) {
                planLocal(group._1(), group._2());
            }
        }
    }

    /**
     * Reads {@code peer}'s blocks from its files when it runs on this host (Spark's default); false when it does not,
     * or its files cannot be read (they are then read through the transport).
     */
    private boolean readHostLocal(BlockManagerId peer, List<WantedBlock> wanted) {
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

    /**
     * This executor's own blocks, sliced from its published map outputs and verified; all of them through Spark's
     * transfer when one of the map outputs cannot be registered.
     */
    private void planLocal(BlockManagerId self, List<WantedBlock> wanted) {
        List<List<WantedBlock>> byMap = new ArrayList<>(WantedBlock.byMap(wanted).values());
        List<MapOutputPublisher.Published> published = new ArrayList<>(byMap.size());
        for (List<WantedBlock> blocks : byMap) {
            WantedBlock first = blocks.getFirst();
            MapOutputPublisher.Published p;
            try {
                p = runtime.publisher.publish(shuffleId, first.blockId().mapId());
            } catch (RuntimeException e) {
                String why = "this executor cannot register map " + first.blockId().mapId() + " of shuffle " + shuffleId
                        + " for reading: " + e.getMessage();
                if (spark == null) {
                    throw failures.of(self, first, why + " (spark.shuffle.rdma.fallback=fail)", e);
                }
                fetchThroughSpark(self, null, RdmaShuffleMetrics.FallbackReason.NOT_SERVED, why);
                return;
            }
            if (p == null) {
                throw failures.of(self, first, "the map output's files are missing on this executor", null);
            }
            published.add(p);
        }
        for (int m = 0; m < byMap.size(); m++) {
            List<WantedBlock> blocks = byMap.get(m);
            MapOutputPublisher.Published p = published.get(m);
            for (WantedBlock w : blocks) {
                int reduceId = w.blockId().reduceId();
                long offset = ShuffleIndexFormat.entry(p.index(), ShuffleIndexFormat.entryOffset(reduceId), 0);
                long length = ShuffleIndexFormat.entry(p.index(), ShuffleIndexFormat.entryOffset(reduceId), 1) - offset;
                if (length == 0) {
                    continue;
                }
                ByteBuffer bytes = p.data().asSlice(offset, length).asByteBuffer();
                if (p.checksums() != null) {
                    verifier.verifyLocal(self, w, bytes, ShuffleIndexFormat.entry(p.checksums(), ShuffleIndexFormat.entryOffset(reduceId), 0));
                }
                ready.add(new Ready(w.blockId(), bytes, null, false));
            }
        }
    }

    /** On a planning thread: plans one peer's reads, queues them, then reports to the task thread. */
    private void planRemote(BlockManagerId peer, RdmaConnection connection, List<WantedBlock> wanted) {
        PlanFailure failure = null;
        try {
            reads.add(planner.batchesFrom(peer, connection, wanted));
        } catch (RemoteReadPlanner.PlanningFailed e) {
            failure = e.failure;
        } catch (RuntimeException | Error e) {
            failure = new PlanFailure(peer, wanted.getFirst(), "planning reads from executor " + peer.executorId() + " failed: " + e, e);
        }
        reads.planned(failure);
    }

    /** {@code blocks} of {@code peer} (null: all the task's blocks of it) come through Spark's transfer. */
    private void fetchThroughSpark(BlockManagerId peer, Set<BlockId> blocks, RdmaShuffleMetrics.FallbackReason reason, String why) {
        RdmaShuffleMetrics.fellBack(reason);
        if (REPORTED_NOT_SERVED.add(peer.executorId() + " " + reason)) {
            LOG.warn("rdma4j shuffle: {}; reading {} through Spark's block transfer (spark.shuffle.rdma.fallback=spark)", why,
                    blocks == null ? "executor " + peer.executorId() + "'s blocks" : "those blocks");
        }
        if (sparkFetches.containsKey(peer) && sparkFetches.get(peer) == null) {
            return; // all of them already
        }
        if (blocks == null) {
            sparkFetches.put(peer, null);
        } else {
            sparkFetches.computeIfAbsent(peer, p -> new HashSet<>()).addAll(blocks);
        }
    }

    /** May wait: whether more blocks come is known only once every peer's planning is taken. */
    @Override
    public boolean hasNext() {
        while (ready.isEmpty()) {
            if (reads.drained()) {
                if (viaSpark == null && !sparkFetches.isEmpty()) {
                    viaSpark = spark.fetch(sparkFetches);
                }
                return viaSpark != null && viaSpark.hasNext();
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
        if (ready.isEmpty()) {
            return viaSpark.next(); // Spark's iterator counts its blocks and bytes itself
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
        InFlightReads.Arrival arrival = reads.take();
        metrics.incFetchWaitTime(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos));
        switch (arrival) {
            case Completed completed -> takeCompleted(completed);
            case Planned planned -> {
                reads.planningTaken();
                PlanFailure f = planned.failure();
                if (f != null && f.viaSpark() != null && spark != null) {
                    fetchThroughSpark(f.peer(), null, f.viaSpark(), f.message());
                } else if (f != null && f.viaSpark() == RdmaShuffleMetrics.FallbackReason.NO_READ_BUFFER) {
                    throw new IllegalStateException("rdma4j shuffle: " + f.message() + " (spark.shuffle.rdma.fallback=fail)", f.cause());
                } else if (f != null) {
                    throw failures.of(f.peer(), f.wanted(), f.message() + (f.viaSpark() != null ? " (spark.shuffle.rdma.fallback=fail)" : ""),
                            f.cause());
                }
            }
            case Unbuffered unbuffered -> takeUnbuffered(unbuffered);
        }
    }

    /** A batch this executor could register no buffer for: Spark fetches its blocks, or with fallback=fail the task fails. */
    private void takeUnbuffered(Unbuffered unbuffered) {
        reads.unbufferedTaken();
        Batch batch = unbuffered.batch();
        String why = "this executor cannot register a buffer of " + batch.bytes() + " bytes to read executor "
                + batch.executorId() + "'s blocks into: " + unbuffered.cause().getMessage();
        if (spark == null) {
            // this executor's memory, not the peer's output: a task failure, not a fetch failure re-running the map stage
            throw new IllegalStateException("rdma4j shuffle: " + why + " (spark.shuffle.rdma.fallback=fail)", unbuffered.cause());
        }
        Set<BlockId> blocks = new HashSet<>();
        batch.ranges().forEach(r -> blocks.addAll(r.blocks()));
        fetchThroughSpark(batch.ranges().getFirst().peer(), blocks, RdmaShuffleMetrics.FallbackReason.NO_READ_BUFFER, why);
    }

    private void takeCompleted(Completed result) {
        Batch batch = result.batch();
        MapRange range = result.range();
        try {
            reads.readTaken(result); // issues the next reads: a failure there still lets this one go below
            if (result.failure() != null) {
                runtime.forget(batch.executorId(), batch.connection());
                throw failures.of(range.peer(), new WantedBlock(range.blocks().getFirst(), range.mapIndex()),
                        "one-sided read of shuffle blocks from executor " + batch.executorId() + " failed: " + result.failure(), result.failure());
            }
            MemorySegment rangeBytes = result.bytes();
            for (int i = 0; i < range.blocks().size(); i++) {
                verifier.verifyRemote(batch, range, rangeBytes, i);
                ready.add(new Ready(range.blocks().get(i), range.block(rangeBytes, i), result.shared(), true));
            }
        } finally {
            // a failure ends the task: cleanup() abandons the blocks; the finished read lets go here
            result.shared().readFinished();
        }
    }

    /**
     * Gives every buffer and peer connection back; called when the task ends, however it ends, and before that by a
     * reader that falls back to Spark's transfer: the second call does nothing (an arena closes once).
     */
    void cleanup() {
        if (cleanedUp) {
            return;
        }
        cleanedUp = true;
        reads.close();
        ready.clear();
        for (PeerConnections.Lease lease; (lease = leases.poll()) != null; ) {
            lease.close();
        }
        if (hostLocal != null) {
            hostLocal.close();
        }
    }
}
