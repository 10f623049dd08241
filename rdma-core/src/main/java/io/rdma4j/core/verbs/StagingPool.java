package io.rdma4j.core.verbs;

import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.nativeloader.SendQueue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;

/**
 * The send staging slots of every connection of a transport: a message fragment is copied into one, posted, and
 * the slot is free again when its SEND completes. A connection holds slots only while its fragments are in flight
 * (at most the credits its peer granted), so idle connections hold none; the pool grows a chunk at a time to the
 * most fragments ever in flight at once and keeps that. Thread-safe.
 */
final class StagingPool implements AutoCloseable {

    private final SlotChunks chunks;
    private final ArrayDeque<Integer> free = new ArrayDeque<>();

    StagingPool(MemorySegment pd, int slotSize, TransportMetrics metrics) {
        this.chunks = new SlotChunks(pd, 0, slotSize, metrics);
    }

    /** A free slot, registering another chunk when none is. */
    synchronized int take() {
        if (free.isEmpty()) {
            int first = chunks.slots();
            chunks.grow();
            for (int i = 0; i < SlotChunks.CHUNK_SLOTS; i++) {
                free.add(first + i);
            }
        }
        return free.poll();
    }

    /** Slot {@code slot} is free again; a negative number names no slot (a work request without one). */
    synchronized void free(int slot) {
        if (slot >= 0) {
            free.add(slot);
        }
    }

    MemorySegment slot(int slot) {
        return chunks.slot(slot);
    }

    int lkey(int slot) {
        return chunks.lkey(slot);
    }

    /** Fragments staged in this pool and sent on {@code queue}: one connection's. */
    MessageChannel.FragmentSender sendingOn(SendQueue queue) {
        return new MessageChannel.FragmentSender() {
            @Override
            public int take() {
                return StagingPool.this.take();
            }

            @Override
            public MemorySegment slot(int slot) {
                return StagingPool.this.slot(slot);
            }

            @Override
            public int send(long wrId, int slot, int length) {
                return queue.postSend(wrId, StagingPool.this.slot(slot).address(), length, lkey(slot));
            }

            @Override
            public void free(int slot) {
                StagingPool.this.free(slot);
            }
        };
    }

    @Override
    public synchronized void close() {
        chunks.close();
        free.clear();
    }
}
