package io.rdma4j.core.internal;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The transport's {@link RegisteredBufferPool}: power-of-two size classes carved out of slabs registered once,
 * larger requests in dedicated registrations cached for reuse, one-off registrations past the limit.
 * Made only by {@link DefaultRdmaTransport#createBufferPool}, which closes it with the transport.
 */
final class SlabBufferPool implements RegisteredBufferPool {

    private static final int CACHE_LINE = 64;

    private final RdmaTransport transport;
    private final PoolConfig config;
    private final ConcurrentLinkedDeque<Block>[] freeBlocks;
    private final List<Registration> slabs = new ArrayList<>();
    private final TreeMap<Long, List<Registration>> cachedLarge = new TreeMap<>();
    private final AtomicLong pooledBytes = new AtomicLong();
    private long cachedLargeBytes;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final LongAdder oneOffRegistrations = new LongAdder();
    private final AtomicLong outstanding = new AtomicLong();

    @SuppressWarnings({"unchecked", "rawtypes"}) // a generic array must be created raw
    SlabBufferPool(RdmaTransport transport, PoolConfig config) {
        this.transport = transport;
        this.config = config;
        int classes = Long.numberOfTrailingZeros(config.slabSize()) - Long.numberOfTrailingZeros(config.minBufferSize()) + 1;
        freeBlocks = new ConcurrentLinkedDeque[classes];
        for (int i = 0; i < classes; i++) {
            freeBlocks[i] = new ConcurrentLinkedDeque<>();
        }
    }

    @Override
    public PoolConfig config() {
        return config;
    }

    @Override
    public PooledBuffer acquire(long size) {
        if (size <= 0) {
            throw new IllegalArgumentException("buffer size must be positive, got " + size);
        }
        if (closed.get()) {
            throw new IllegalStateException("buffer pool is closed");
        }
        outstanding.incrementAndGet();
        try {
            return size <= config.slabSize() ? acquireSmall(size) : acquireLarge(size);
        } catch (RuntimeException | Error e) {
            outstanding.decrementAndGet();
            throw e;
        }
    }

    private PooledBuffer acquireSmall(long size) {
        int sizeClass = sizeClass(size);
        Block block = freeBlocks[sizeClass].pollFirst();
        if (block == null) {
            block = carveSlab(sizeClass);
        }
        if (block == null) {
            return oneOff(size);
        }
        return new Lent(this, block.segment.asSlice(0, size), block.region, block, null, null);
    }

    private int sizeClass(long size) {
        long rounded = Math.max(config.minBufferSize(), Long.highestOneBit(size - 1) << 1);
        return Long.numberOfTrailingZeros(rounded) - Long.numberOfTrailingZeros(config.minBufferSize());
    }

    private Block carveSlab(int sizeClass) {
        long slabSize = config.slabSize();
        if (pooledBytes.addAndGet(slabSize) > config.maxPooledBytes()) {
            pooledBytes.addAndGet(-slabSize);
            return null;
        }
        RegisteredRegion region;
        synchronized (slabs) {
            try {
                if (closed.get()) {
                    throw new IllegalStateException("buffer pool is closed");
                }
                // An arena per slab: a slab whose registration fails frees its memory at once.
                Registration slab = registerDedicated(slabSize);
                slabs.add(slab);
                region = slab.region;
            } catch (RuntimeException | Error e) {
                pooledBytes.addAndGet(-slabSize);
                throw e;
            }
        }
        long blockSize = config.minBufferSize() << sizeClass;
        MemorySegment slab = region.segment();
        Block first = null;
        for (long off = 0; off < slabSize; off += blockSize) {
            Block b = new Block(slab.asSlice(off, blockSize), region, sizeClass);
            if (first == null) {
                first = b;
            } else {
                freeBlocks[sizeClass].addLast(b);
            }
        }
        return first;
    }

    private PooledBuffer acquireLarge(long size) {
        synchronized (cachedLarge) {
            // Reuse a cached registration of at least the size and at most twice it, to bound waste.
            var entry = cachedLarge.ceilingEntry(size);
            if (entry != null && entry.getKey() <= 2 * size) {
                List<Registration> list = entry.getValue();
                Registration large = list.removeLast();
                if (list.isEmpty()) {
                    cachedLarge.remove(entry.getKey());
                }
                cachedLargeBytes -= large.region.segment().byteSize();
                return new Lent(this, large.region.segment().asSlice(0, size), large.region, null, large, null);
            }
        }
        Registration large = registerDedicated(size);
        return new Lent(this, large.region.segment(), large.region, null, large, null);
    }

    private PooledBuffer oneOff(long size) {
        oneOffRegistrations.increment();
        Registration dedicated = registerDedicated(size);
        return new Lent(this, dedicated.region.segment(), dedicated.region, null, null, dedicated);
    }

    private Registration registerDedicated(long size) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment segment = arena.allocate(size, CACHE_LINE);
            return new Registration(arena, transport.register(segment, config.access()));
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
    }

    private void release(Lent lent) {
        outstanding.decrementAndGet();
        if (lent.block != null) {
            if (!closed.get()) {
                freeBlocks[lent.block.sizeClass].addFirst(lent.block);
            }
            return;
        }
        if (lent.large != null) {
            long size = lent.large.region.segment().byteSize();
            synchronized (cachedLarge) {
                if (!closed.get() && cachedLargeBytes + size <= config.maxCachedLargeBytes()) {
                    cachedLarge.computeIfAbsent(size, k -> new ArrayList<>()).add(lent.large);
                    cachedLargeBytes += size;
                    return;
                }
            }
            lent.large.free();
            return;
        }
        lent.oneOff.free();
    }

    @Override
    public long pooledBytes() {
        return Math.min(pooledBytes.get(), config.maxPooledBytes());
    }

    @Override
    public long outstandingBuffers() {
        return outstanding.get();
    }

    @Override
    public long oneOffRegistrations() {
        return oneOffRegistrations.sum();
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        synchronized (slabs) {
            slabs.forEach(Registration::free);
            slabs.clear();
        }
        synchronized (cachedLarge) {
            cachedLarge.values().forEach(list -> list.forEach(Registration::free));
            cachedLarge.clear();
            cachedLargeBytes = 0;
        }
        for (ConcurrentLinkedDeque<Block> q : freeBlocks) {
            q.clear();
        }
    }

    private record Block(MemorySegment segment, RegisteredRegion region, int sizeClass) {
    }

    /** Memory with its own arena and its registration, freed together. */
    private record Registration(Arena arena, RegisteredRegion region) {
        void free() {
            region.close();
            arena.close();
        }
    }

    private static final class Lent implements PooledBuffer {
        private final SlabBufferPool pool;
        private final MemorySegment segment;
        private final RegisteredRegion region;
        private final Block block;
        private final Registration large;
        private final Registration oneOff;
        private final AtomicBoolean returned = new AtomicBoolean();

        Lent(SlabBufferPool pool, MemorySegment segment, RegisteredRegion region, Block block, Registration large, Registration oneOff) {
            this.pool = pool;
            this.segment = segment;
            this.region = region;
            this.block = block;
            this.large = large;
            this.oneOff = oneOff;
        }

        @Override
        public MemorySegment segment() {
            return segment;
        }

        @Override
        public RegisteredRegion region() {
            return region;
        }

        @Override
        public void close() {
            if (returned.compareAndSet(false, true)) {
                pool.release(this);
            }
        }
    }
}
