package io.rdma4j.core.pool;

import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;

import java.lang.foreign.MemorySegment;

/**
 * A registered buffer lent by a {@link RegisteredBufferPool}: use {@link #segment()} as the sink of
 * reads (or publish {@link #descriptor()}), then {@link #close()} to give it back. Do not touch the
 * segment after closing.
 */
public interface PooledBuffer extends AutoCloseable {

    /** Exactly the requested number of bytes, inside {@link #region()}. */
    MemorySegment segment();

    /** The registered region the buffer lies in (shared with other buffers of the same slab). */
    RegisteredRegion region();

    /** A descriptor covering just this buffer. */
    default RegionDescriptor descriptor() {
        MemorySegment s = segment();
        return region().descriptor().slice(s.address() - region().segment().address(), s.byteSize());
    }

    /** Returns the buffer to the pool. Idempotent. */
    @Override
    void close();
}
