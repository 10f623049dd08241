package io.rdma4j.kafka.protocol;

import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The arrays compressed batches are inflated into, given back once every record sliced from one has been converted:
 * inflating then writes into an array already in the cache instead of allocating, and zeroing, one per batch (a fifth
 * of an lz4 batch's decoding time). A record's key and value are slices bounded by the bytes inflated for its own
 * batch, so what an earlier batch left in a reused array is never read.
 * <p>
 * One pool serves the whole process ({@link #SHARED}), bounded in bytes whatever the number of consumers; an array
 * given back to a full pool, and one never given back (a range dropped by a seek), is left to the garbage collector.
 * Thread-safe: a decoder thread takes, the polling thread gives back.
 */
public final class InflateArrays {

    /** The process's pool: 16 MiB at most. */
    public static final InflateArrays SHARED = new InflateArrays(16 << 20);
    /** Keeps nothing: every batch is inflated into a new array. */
    public static final InflateArrays NONE = new InflateArrays(0);

    private final long maxBytes;
    /** Most recently given back first, as the likeliest to be in a cache. */
    private final ConcurrentLinkedDeque<byte[]> free = new ConcurrentLinkedDeque<>();
    private final AtomicLong pooledBytes = new AtomicLong();

    public InflateArrays(long maxBytes) {
        this.maxBytes = maxBytes;
    }

    /** An array of at least {@code length} bytes, with anything in it: the pool's newest if large enough, else a new one. */
    public byte[] take(int length) {
        byte[] pooled = free.pollFirst();
        if (pooled != null) {
            pooledBytes.addAndGet(-pooled.length);
            if (pooled.length >= length) {
                return pooled;
            }
        }
        return new byte[length];
    }

    /**
     * Takes {@code array} back for a later batch. Call only once nothing reads the records inflated into it any more.
     * An array larger than a quarter of the pool is not kept, so that one batch does not take the room of many.
     */
    public void giveBack(byte[] array) {
        if (array.length > maxBytes / 4) {
            return;
        }
        if (pooledBytes.addAndGet(array.length) > maxBytes) {
            pooledBytes.addAndGet(-array.length);
            return;
        }
        free.offerFirst(array);
    }

    /** The bytes of the arrays held for reuse. */
    public long pooledBytes() {
        return pooledBytes.get();
    }
}
