package io.rdma4j.kafka;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.pool.PooledBuffer;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Bytes of one exported segment, from {@code position} on, in a registered buffer: read now ({@link #inBuffer}), being
 * read and decoded ahead while the application works on the records before them ({@link #pending}), or left over
 * from a fetch that stopped at {@code max.poll.records} ({@link #rest}); {@link ExporterReads} issues the READs.
 * KafkaConsumer keeps its next fetch in flight and its unreturned records the same way; without it every poll waits
 * for a READ and re-reads what the poll before did not return.
 */
final class BatchRange {

    final long segmentBase;
    final long position;
    private final PooledBuffer buffer;
    private final MemorySegment bytes;
    /** Completes once nothing writes {@link #buffer} or reads it on another thread any more. */
    private final CompletableFuture<DecodedBatches> done;
    /** When the READ was posted and when it finished (visible once {@link #done} is joined); 0 when not read ahead. */
    private final long startNanos;
    private final long[] readDoneNanos;
    /** The batches, once {@link #await} returned them. */
    private DecodedBatches decoded;

    private BatchRange(long segmentBase, long position, PooledBuffer buffer, MemorySegment bytes,
                       CompletableFuture<DecodedBatches> done, long startNanos, long[] readDoneNanos) {
        this.segmentBase = segmentBase;
        this.position = position;
        this.buffer = buffer;
        this.bytes = bytes;
        this.done = done;
        this.startNanos = startNanos;
        this.readDoneNanos = readDoneNanos;
    }

    /** Bytes already in {@code buffer}; its batches are parsed when the consumer's thread asks. */
    static BatchRange inBuffer(long segmentBase, long position, PooledBuffer buffer) {
        return new BatchRange(segmentBase, position, buffer, buffer.segment(),
                CompletableFuture.completedFuture(null), 0, new long[1]);
    }

    /**
     * Bytes a READ posted at {@code startNanos} is writing into {@code buffer}: {@code done} completes once nothing
     * writes or decodes them any more, with their batches when decoded ahead (else null), having set
     * {@code readDoneNanos[0]} when the READ finished.
     */
    static BatchRange pending(long segmentBase, long position, PooledBuffer buffer, CompletableFuture<DecodedBatches> done,
                              long startNanos, long[] readDoneNanos) {
        return new BatchRange(segmentBase, position, buffer, buffer.segment(), done, startNanos, readDoneNanos);
    }

    /** The whole batches from {@code fromPosition} on, owning the buffer from now on; null when none starts there. */
    BatchRange rest(long fromPosition, DecodedBatches decoded) {
        DecodedBatches rest = decoded.from(fromPosition - position);
        if (rest == null || rest.batches().isEmpty()) {
            return null;
        }
        return new BatchRange(segmentBase, fromPosition, buffer, bytes.asSlice(fromPosition - position),
                CompletableFuture.completedFuture(rest), 0, readDoneNanos);
    }

    long end() {
        return position + bytes.byteSize();
    }

    MemorySegment bytes() {
        return bytes;
    }

    /** Whether this range starts where a fetch must start and ends inside what may be read now. */
    boolean serves(long segmentBase, long position, long validEnd) {
        return this.segmentBase == segmentBase && this.position == position && end() <= validEnd;
    }

    /**
     * Waits until the bytes are in (throwing what {@link RdmaConnection#readAndWait} would) and returns their
     * batches (the same ones on every call). A failed READ gives its buffer back.
     */
    DecodedBatches await() {
        if (decoded != null) {
            return decoded;
        }
        DecodedBatches ahead;
        try {
            ahead = done.join();
        } catch (CompletionException e) {
            buffer.close();
            if (e.getCause() instanceof RdmaException r) {
                throw r;
            }
            throw new RdmaException("read-ahead of segment " + segmentBase + " at byte " + position + " failed: " + e.getCause(), e.getCause());
        }
        decoded = ahead != null ? ahead : DecodedBatches.parse(bytes);
        return decoded;
    }

    /** How long the READ took, once {@link #await} returned; 0 for bytes read synchronously or left over. */
    long readNanos() {
        return startNanos == 0 ? 0 : readDoneNanos[0] - startNanos;
    }

    /** Waits, up to {@code timeout}, until the READ (and decoding) has finished one way or the other. */
    void awaitFinished(Duration timeout) {
        awaitOver(done, timeout);
    }

    /** Waits, up to {@code timeout}, until {@code operation} is over one way or the other. */
    static void awaitOver(CompletableFuture<?> operation, Duration timeout) {
        try {
            operation.handle((v, e) -> null).get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException e) {
            // Finished with an error, or the connection's own timeout is longer: nothing more to wait for here.
        }
    }

    /** Gives the buffer back: now if nothing uses it, else once the READ and its decoding have finished. */
    void release() {
        if (done.isDone()) {
            buffer.close();
        } else {
            done.whenComplete((v, e) -> buffer.close());
        }
    }
}
