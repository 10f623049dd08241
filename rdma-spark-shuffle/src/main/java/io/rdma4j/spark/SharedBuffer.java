package io.rdma4j.spark;

import io.rdma4j.core.pool.PooledBuffer;

import java.util.concurrent.atomic.AtomicInteger;

/** A pooled buffer shared by the blocks of one batched read; goes back to the pool when the last block is closed. */
final class SharedBuffer {
    private final PooledBuffer buffer;
    private final AtomicInteger references;

    SharedBuffer(PooledBuffer buffer, int references) {
        this.buffer = buffer;
        this.references = new AtomicInteger(references);
    }

    void release() {
        if (references.decrementAndGet() == 0) {
            buffer.close();
        }
    }

    /** Gives the buffer back regardless of readers still open (task end). */
    void releaseAll() {
        references.set(0);
        buffer.close();
    }
}
