package io.rdma4j.spark;

import io.rdma4j.core.RegistrationException;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.spark.RemoteReadPlanner.Batch;
import io.rdma4j.spark.RemoteReadPlanner.MapRange;
import io.rdma4j.spark.RemoteReadPlanner.PlanFailure;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * A reduce task's remote reads, at most {@code maxBytesInFlight} requested and not yet taken (a batch larger than that
 * goes alone when nothing else is in flight). Planning threads queue their peer's batches here; each map range of a
 * batch is its own READ into its slice of the batch's pooled buffer. Finished reads and finished plannings arrive in
 * one queue that the task thread takes from, in the order they finished.
 */
final class InFlightReads {

    /** What the task thread takes. */
    sealed interface Arrival permits Completed, Planned, Unbuffered { }

    /**
     * A batch no buffer could be registered for (this executor's registered-memory limit) while none of the task's
     * reads was in flight: none of its reads was issued, and its blocks are Spark's to fetch.
     */
    record Unbuffered(Batch batch, RegistrationException cause) implements Arrival { }

    /** One map range's read into its slice of the batch's shared buffer, finished. */
    record Completed(Batch batch, MapRange range, MemorySegment bytes, SharedBuffer shared, Throwable failure) implements Arrival { }

    /**
     * One peer's planning finished: its batches are queued, or it failed ({@code failure} non-null). The task
     * thread builds the FetchFailedException, since Spark ties it to the TaskContext of the constructing thread.
     */
    record Planned(PlanFailure failure) implements Arrival { }

    private final RegisteredBufferPool pool;
    private final long maxBytesInFlight;
    private final ArrayDeque<Batch> pending = new ArrayDeque<>();
    private final LinkedBlockingQueue<Arrival> arrivals = new LinkedBlockingQueue<>();
    private final List<SharedBuffer> handedOut = new ArrayList<>();
    /** Reads issued and not yet taken. */
    private int outstanding;
    /** Peers whose planning has not been taken yet. */
    private int planning;
    private long bytesInFlight;
    private boolean closed;

    InFlightReads(RegisteredBufferPool pool, long maxBytesInFlight) {
        this.pool = pool;
        this.maxBytesInFlight = maxBytesInFlight;
    }

    /** Task thread, before any planning starts: how many peers' plannings are to arrive. */
    synchronized void expectPlannings(int peers) {
        planning = peers;
    }

    /** Planning thread: queues its peer's batches and issues what the bound allows. */
    void add(List<Batch> batches) {
        synchronized (this) {
            if (!closed) {
                pending.addAll(batches);
            }
        }
        issueMore();
    }

    /** Planning thread: its peer's planning finished, having queued its batches or failed with {@code failure}. */
    void planned(PlanFailure failure) {
        arrivals.add(new Planned(failure));
    }

    /** Whether nothing more can arrive: every planning taken, every read issued and taken. */
    synchronized boolean drained() {
        return pending.isEmpty() && outstanding == 0 && planning == 0;
    }

    /** Task thread: waits for the next finished read or planning and takes it. */
    Arrival take() {
        try {
            return arrivals.take();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for shuffle blocks", e);
        }
    }

    /** Task thread: a planning was taken. */
    synchronized void planningTaken() {
        planning--;
    }

    /** Task thread: a batch without a buffer was taken. */
    synchronized void unbufferedTaken() {
        outstanding--;
    }

    /** Task thread: a finished read was taken; its bytes no longer count in flight, so more may be issued. */
    void readTaken(Completed read) {
        synchronized (this) {
            outstanding--;
            bytesInFlight -= read.range().length();
        }
        issueMore();
    }

    /**
     * Issues batches while the bytes in flight allow. Each map range of a batch is its own read into its
     * slice of the batch's buffer, so a range's blocks are handed to Spark as soon as that range arrived
     * (as Spark's fetcher hands out each block), not when the whole batch did.
     */
    private synchronized void issueMore() {
        while (!closed && !pending.isEmpty()
                && (bytesInFlight == 0 || bytesInFlight + pending.peek().bytes() <= maxBytesInFlight)) {
            Batch batch = pending.poll();
            PooledBuffer pooled;
            try {
                pooled = pool.acquire(batch.bytes());
            } catch (RegistrationException e) {
                if (bytesInFlight > 0) {
                    // tried again as each read in flight is taken. A taken read's buffer comes back only once its blocks
                    // are consumed, so the last try may still be refused: waiting for buffers rather than reads could
                    // wait for ever on a consumer that holds a block's stream open
                    pending.addFirst(batch);
                    return;
                }
                outstanding++; // until the task thread took it, as a read
                arrivals.add(new Unbuffered(batch, e));
                continue;
            }
            bytesInFlight += batch.bytes();
            outstanding += batch.ranges().size();
            int blockCount = batch.ranges().stream().mapToInt(r -> r.blocks().size()).sum();
            SharedBuffer shared = new SharedBuffer(pooled, batch.ranges().size(), blockCount);
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

    /**
     * The task ended: issues nothing more, abandons the blocks of every buffer handed out, and lets go of the reads
     * that finished and were not taken; a buffer returns to the pool once its reads still in flight finish too.
     */
    void close() {
        List<SharedBuffer> toRelease;
        synchronized (this) {
            closed = true;
            pending.clear();
            toRelease = new ArrayList<>(handedOut);
            handedOut.clear();
        }
        toRelease.forEach(SharedBuffer::abandonBlocks);
        Arrival a;
        while ((a = arrivals.poll()) != null) {
            if (a instanceof Completed c) {
                c.shared().readFinished();
            }
        }
    }
}
