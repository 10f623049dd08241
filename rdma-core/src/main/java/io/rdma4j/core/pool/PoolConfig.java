package io.rdma4j.core.pool;

import io.rdma4j.core.Access;

import java.util.Set;

/**
 * Sizes of a {@link RegisteredBufferPool}.
 *
 * @param slabSize         bytes registered at once and carved into buffers of one size class (power of two)
 * @param minBufferSize    smallest size class (power of two)
 * @param maxPooledBytes   slab memory the pool may hold; beyond it buffers are registered per use and freed on release
 * @param maxCachedLargeBytes buffers larger than a slab are registered on demand and kept for reuse up to this total
 * @param access           rights of every pooled buffer (default: read sink that peers may read)
 */
public record PoolConfig(long slabSize, long minBufferSize, long maxPooledBytes, long maxCachedLargeBytes, Set<Access> access) {

    public PoolConfig {
        if (Long.bitCount(slabSize) != 1 || Long.bitCount(minBufferSize) != 1 || minBufferSize > slabSize) {
            throw new IllegalArgumentException("slabSize and minBufferSize must be powers of two with minBufferSize <= slabSize");
        }
        if (maxPooledBytes < 0 || maxCachedLargeBytes < 0) {
            throw new IllegalArgumentException("pool limits must not be negative");
        }
        access = Set.copyOf(access);
    }

    /** 4 MiB slabs, 4 KiB smallest buffer, 256 MiB pooled, 256 MiB of cached large buffers. */
    public static PoolConfig defaults() {
        return new PoolConfig(4L << 20, 4L << 10, 256L << 20, 256L << 20, Access.readSink());
    }

    public PoolConfig withSlabSize(long bytes) {
        return new PoolConfig(bytes, Math.min(minBufferSize, bytes), maxPooledBytes, maxCachedLargeBytes, access);
    }

    public PoolConfig withMaxPooledBytes(long bytes) {
        return new PoolConfig(slabSize, minBufferSize, bytes, maxCachedLargeBytes, access);
    }

    public PoolConfig withAccess(Set<Access> rights) {
        return new PoolConfig(slabSize, minBufferSize, maxPooledBytes, maxCachedLargeBytes, rights);
    }
}
