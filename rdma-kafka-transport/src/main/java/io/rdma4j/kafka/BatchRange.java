package io.rdma4j.kafka;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.kafka.protocol.SegmentDirectory;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * Bytes of one exported segment, from {@code position} on, in a registered buffer: read now ({@link #read}), read and
 * decoded ahead while the application works on the records before them ({@link #readAhead}), or left over from a
 * fetch that stopped at {@code max.poll.records} ({@link #rest}). KafkaConsumer keeps its next fetch in flight and
 * its unreturned records the same way; without it every poll waits for a READ and re-reads what the poll before did
 * not return.
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
    static BatchRange read(long segmentBase, long position, PooledBuffer buffer) {
        return new BatchRange(segmentBase, position, buffer, buffer.segment(),
                CompletableFuture.completedFuture(null), 0, new long[1]);
    }

    /**
     * Starts a READ of {@code length} bytes from {@code position} of the segment's region, whose batches
     * {@code decoder} then checks and parses with {@code decode} (run on that executor only); with no decoder
     * they are parsed when the consumer's thread asks.
     */
    static BatchRange readAhead(RdmaConnection c, SegmentDirectory.Segment segment, long position, long length,
                                RegisteredBufferPool pool, Executor decoder, Function<MemorySegment, DecodedBatches> decode) {
        PooledBuffer buffer = pool.acquire(length);
        long start = System.nanoTime();
        long[] readDone = new long[1];
        CompletableFuture<DecodedBatches> done;
        try {
            CompletableFuture<Void> read = c.read(segment.region(), position, buffer.segment());
            done = decoder == null
                    ? read.thenApply(v -> {
                        readDone[0] = System.nanoTime();
                        return null;
                    })
                    : read.thenApplyAsync(v -> {
                        readDone[0] = System.nanoTime();
                        return decode.apply(buffer.segment());
                    }, decoder);
        } catch (RuntimeException e) {
            buffer.close();
            throw e;
        }
        return new BatchRange(segment.baseOffset(), position, buffer, buffer.segment(), done, start, readDone);
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
     * batches. A failed READ gives its buffer back.
     */
    DecodedBatches await() {
        DecodedBatches decoded;
        try {
            decoded = done.join();
        } catch (CompletionException e) {
            buffer.close();
            if (e.getCause() instanceof RdmaException r) {
                throw r;
            }
            throw new RdmaException("read-ahead of segment " + segmentBase + " at byte " + position + " failed: " + e.getCause(), e.getCause());
        }
        return decoded != null ? decoded : DecodedBatches.parse(bytes);
    }

    /** How long the READ took, once {@link #await} returned; 0 for bytes read synchronously or left over. */
    long readNanos() {
        return startNanos == 0 ? 0 : readDoneNanos[0] - startNanos;
    }

    /** Waits, up to {@code timeout}, until the READ (and decoding) has finished one way or the other. */
    void awaitFinished(Duration timeout) {
        try {
            done.handle((v, e) -> null).get(timeout.toNanos(), TimeUnit.NANOSECONDS);
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
