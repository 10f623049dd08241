package io.rdma4j.core.pool;

/**
 * Registered memory handed out and returned, so the data path never registers memory. Requests up to
 * the slab size come from power-of-two size classes carved out of slabs that are registered once;
 * larger requests (any size, beyond 2 GiB too) get a dedicated registration that is cached for reuse.
 * Past {@code maxPooledBytes} a request still succeeds with a buffer registered for that use alone, so
 * acquiring never blocks; bound the bytes you hold in flight yourself. Thread-safe.
 *
 * <p>Made by {@link io.rdma4j.core.RdmaTransport#createBufferPool(PoolConfig)}, the one way to make one: the
 * transport closes its pools when it closes.
 */
public interface RegisteredBufferPool extends AutoCloseable {

    PoolConfig config();

    /** A registered buffer of exactly {@code size} bytes. */
    PooledBuffer acquire(long size);

    /** Slab memory registered by the pool. */
    long pooledBytes();

    /** Buffers lent and not yet returned. */
    long outstandingBuffers();

    /** Buffers that had to be registered for one use because the pool was full. */
    long oneOffRegistrations();

    /** Deregisters and frees everything. Buffers still lent become unusable. Idempotent. */
    @Override
    void close();
}
