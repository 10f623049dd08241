package io.rdma4j.kafka;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.kafka.protocol.BatchHeaders;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.utils.BufferSupplier;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The one place that issues RDMA READs of an exporter's memory: watermark records, and segment bytes either now or
 * ahead of the next fetch, into registered buffers of its own pool. It holds at most one range per partition read
 * ahead or left over, all of them within {@code fetch.max.bytes}, and decodes ranges read ahead on one daemon thread.
 * Used by the polling thread only.
 */
final class ExporterReads implements AutoCloseable {

    /** A v2 batch's length field is a signed 32-bit count after the 12-byte log overhead. */
    static final long MAX_BATCH_BYTES = BatchHeaders.LOG_OVERHEAD + (long) Integer.MAX_VALUE;
    /** Reads of a watermark record caught mid-update before giving up. */
    private static final int WATERMARK_ATTEMPTS = 100;

    private final RegisteredBufferPool pool;
    /** Never null: {@link RdmaFetchMetrics#detached()} where nobody reads the counts. */
    private final RdmaFetchMetrics metrics;
    /**
     * Checks and inflates the batches of each read-ahead while the application works on the records before them
     * (one daemon thread, started on the first read-ahead), with working buffers only it uses; null to decode on
     * the consumer's thread.
     */
    private final ExecutorService decoder;
    private final BufferSupplier decoderBuffers = BufferSupplier.create();
    /** {@code fetch.max.bytes}: what may be held read ahead or left over across all partitions. */
    private final long maxBytesAhead;
    /** How long closing waits for READs still in flight. */
    private final Duration closeTimeout;
    /** Per partition, the next bytes of its cursor's segment: in flight, or left over from the last fetch. */
    private final Map<TopicPartition, BatchRange> ahead = new HashMap<>();
    /** Watermark READs issued without waiting and not over yet ({@link #watermarkAhead}). */
    private final Set<CompletableFuture<Void>> watermarksInFlight = ConcurrentHashMap.newKeySet();

    ExporterReads(RdmaTransport transport, RdmaFetchMetrics metrics, boolean decodeAhead, long maxBytesAhead) {
        this.pool = transport.createBufferPool(PoolConfig.defaults());
        this.metrics = metrics;
        this.maxBytesAhead = maxBytesAhead;
        this.closeTimeout = transport.config().operationTimeout();
        this.decoder = decodeAhead
                ? Executors.newSingleThreadExecutor(Thread.ofPlatform().daemon().name("rdma4j-kafka-decoder").factory()) : null;
    }

    /** The registered buffers READs land in. */
    RegisteredBufferPool pool() {
        return pool;
    }

    /** The watermark record in {@code region}, read again while it is caught mid-update. */
    Watermark watermark(RdmaConnection c, RegionDescriptor region) {
        try (PooledBuffer buffer = pool.acquire(Watermark.SIZE)) {
            for (int attempt = 0; attempt < WATERMARK_ATTEMPTS; attempt++) {
                timedRead(c, region, 0, buffer.segment());
                Watermark w = Watermark.readFrom(buffer.segment());
                if (w != null) {
                    return w;
                }
                Thread.onSpinWait();
            }
        }
        throw new RdmaException("the watermark record never read consistently (" + WATERMARK_ATTEMPTS + " attempts)");
    }

    /**
     * The watermark record in {@code region}, read without waiting: null when the READ failed or caught the record
     * mid-update (then {@link #watermark} reads it). The one method called off the polling thread too (as a directory
     * reply completes); its buffer goes back once the READ is over, and closing waits for that.
     */
    CompletableFuture<Watermark> watermarkAhead(RdmaConnection c, RegionDescriptor region) {
        PooledBuffer buffer = pool.acquire(Watermark.SIZE);
        // Tracked before the READ is posted: a close() that misses it then comes after the connections closed, so
        // the READ fails without writing.
        CompletableFuture<Void> over = new CompletableFuture<>();
        watermarksInFlight.add(over);
        over.whenComplete((v, e) -> watermarksInFlight.remove(over));
        CompletableFuture<Void> read;
        try {
            read = c.read(region, 0, buffer.segment());
        } catch (RuntimeException e) {
            buffer.close();
            over.complete(null);
            return CompletableFuture.completedFuture(null);
        }
        read.whenComplete((v, e) -> over.complete(null));
        return read.handle((v, e) -> {
            try (buffer) {
                return e == null ? Watermark.readFrom(buffer.segment()) : null;
            } catch (IllegalArgumentException notAWatermark) {
                return null; // the synchronous read meets it again, and fails the fetch as it always did
            }
        });
    }

    /**
     * The bytes of {@code segment} from {@code position} on, with their batches ready ({@link BatchRange#await} returns
     * at once): what is held for {@code tp} when it starts there and lies below {@code validEnd}, else read now, up to
     * {@code fetchBytes}, or the whole first batch where that is larger (Kafka returns at least one batch). The caller
     * releases the range.
     */
    BatchRange load(TopicPartition tp, RdmaConnection c, SegmentDirectory.Segment segment, long position, long validEnd,
                    long fetchBytes) {
        BatchRange range = ahead.remove(tp);
        if (range != null && !range.serves(segment.baseOffset(), position, validEnd)) {
            range.release();
            range = null;
        }
        if (range == null) {
            range = BatchRange.inBuffer(segment.baseOffset(), position, read(c, segment, position, Math.min(validEnd - position, fetchBytes)));
        }
        try {
            range.await();
            if (range.readNanos() > 0) {
                metrics.readNanos(range.readNanos());
            }
            long first = BatchHeaders.batchSize(range.bytes(), 0);
            if (first > range.bytes().byteSize()) {
                if (first > MAX_BATCH_BYTES) {
                    throw new CorruptRecordException("batch at byte " + position + " of segment " + segment.baseOffset()
                            + " claims " + first + " bytes, more than a record batch can have (" + MAX_BATCH_BYTES + ")");
                }
                if (position + first > validEnd) {
                    throw new CorruptRecordException("batch at byte " + position + " of segment " + segment.baseOffset()
                            + " claims " + first + " bytes, past the high watermark position " + validEnd);
                }
                range.release();
                range = null;
                range = BatchRange.inBuffer(segment.baseOffset(), position, read(c, segment, position, first));
                range.await();
            }
            return range;
        } catch (RuntimeException e) {
            if (range != null) {
                range.release();
            }
            throw e;
        }
    }

    /**
     * After a fetch used {@code range} up to byte {@code next}: keeps its whole batches from there on for the next
     * fetch (a fetch stopped at {@code max.poll.records}), or else starts reading the bytes after it, each only
     * within {@code fetch.max.bytes} across partitions. Returns whether it kept {@code range}'s buffer (else the
     * caller releases it).
     */
    boolean keepAhead(TopicPartition tp, RdmaConnection c, SegmentDirectory.Segment segment, BatchRange range, long next,
                      long validEnd, long fetchBytes) {
        BatchRange rest = next < range.end() ? range.rest(next, range.await()) : null;
        if (rest != null && bytesAhead() + rest.bytes().byteSize() <= maxBytesAhead) {
            ahead.put(tp, rest);
            return true;
        }
        if (rest == null && next < validEnd && bytesAhead() + Math.min(validEnd - next, fetchBytes) <= maxBytesAhead) {
            ahead.put(tp, readAhead(c, segment, next, Math.min(validEnd - next, fetchBytes)));
        }
        return false;
    }

    /** Bytes held read ahead or left over, across partitions. */
    long bytesAhead() {
        long held = 0;
        for (BatchRange r : ahead.values()) {
            held += r.bytes().byteSize();
        }
        return held;
    }

    /** Gives back what is held for {@code tp}. */
    void release(TopicPartition tp) {
        BatchRange r = ahead.remove(tp);
        if (r != null) {
            r.release();
        }
    }

    /** Starts a READ of {@code length} bytes from {@code position} of the segment, decoded ahead when there is a decoder. */
    private BatchRange readAhead(RdmaConnection c, SegmentDirectory.Segment segment, long position, long length) {
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
                        return DecodedBatches.decode(buffer.segment(), decoderBuffers);
                    }, decoder);
        } catch (RuntimeException e) {
            buffer.close();
            throw e;
        }
        return BatchRange.pending(segment.baseOffset(), position, buffer, done, start, readDone);
    }

    private PooledBuffer read(RdmaConnection c, SegmentDirectory.Segment segment, long offset, long length) {
        PooledBuffer buffer = pool.acquire(length);
        try {
            timedRead(c, segment.region(), offset, buffer.segment());
            return buffer;
        } catch (RuntimeException e) {
            buffer.close();
            throw e;
        }
    }

    private void timedRead(RdmaConnection c, RegionDescriptor region, long offset, MemorySegment into) {
        long start = System.nanoTime();
        c.readAndWait(region, offset, into);
        metrics.readNanos(System.nanoTime() - start);
    }

    /** Call once the connections are closed, which fails the READs still in flight. */
    @Override
    public void close() {
        List<BatchRange> inFlight = List.copyOf(ahead.values());
        inFlight.forEach(BatchRange::release);
        ahead.clear();
        // Nothing may still be written into the pool's memory when it is freed.
        inFlight.forEach(r -> r.awaitFinished(closeTimeout));
        List.copyOf(watermarksInFlight).forEach(read -> BatchRange.awaitOver(read, closeTimeout));
        if (decoder != null) {
            decoder.close(); // Waits for decoding under way (of ranges released earlier too): it reads pool memory.
        }
        pool.close();
        decoderBuffers.close();
    }
}
