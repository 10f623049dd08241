package io.rdma4j.spark;

import io.rdma4j.core.pool.PooledBuffer;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A pooled buffer shared by the reads of one batch and the blocks they bring. It goes back to the pool
 * once every read into it has finished (the NIC no longer writes into it) and every block is released,
 * whether its stream was closed or the task ended ({@link #abandonBlocks}).
 */
final class SharedBuffer {
    private final PooledBuffer buffer;
    /** Reads not yet finished plus blocks not yet released. */
    private final AtomicInteger references;
    private final AtomicInteger blocksLeft;

    SharedBuffer(PooledBuffer buffer, int reads, int blocks) {
        this.buffer = buffer;
        this.references = new AtomicInteger(reads + blocks);
        this.blocksLeft = new AtomicInteger(blocks);
    }

    MemorySegment segment() {
        return buffer.segment();
    }

    /** One read into the buffer has finished, successfully or not. */
    void readFinished() {
        drop(1);
    }

    /** One block's stream is done with its bytes. */
    void release() {
        if (blocksLeft.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            drop(1);
        }
    }

    /** The task ended: no block will be read any more; the buffer returns once the reads in flight finish. */
    void abandonBlocks() {
        int left = blocksLeft.getAndSet(0);
        if (left > 0) {
            drop(left);
        }
    }

    private void drop(int n) {
        if (references.addAndGet(-n) == 0) {
            buffer.close();
        }
    }
}
