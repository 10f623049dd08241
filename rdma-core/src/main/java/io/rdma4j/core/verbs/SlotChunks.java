package io.rdma4j.core.verbs;

import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.nativeloader.Verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * Registered memory in equal slots, added a chunk at a time and kept until {@link #close}: the message slots a
 * transport shares among its connections ({@link ReceivePool}, {@link StagingPool}). A slot is named by one int,
 * its chunk times {@link #CHUNK_SLOTS} plus its index. Lookups need no lock (the chunk array is replaced, never
 * changed); growing is the owner's to serialise.
 */
final class SlotChunks implements AutoCloseable {

    /** Slots per registration: 256 slots of 4 KiB register 1 MiB at a time. */
    static final int CHUNK_SLOTS = 256;

    /** One registration: its memory and memory region. */
    record Chunk(MemorySegment memory, Verbs.MemoryRegion region) {
    }

    private final MemorySegment pd;
    private final int accessFlags;
    private final int slotSize;
    private final TransportMetrics metrics;
    private final Arena arena = Arena.ofShared();
    private volatile Chunk[] chunks = new Chunk[0];
    private long registeredBytes;

    SlotChunks(MemorySegment pd, int accessFlags, int slotSize, TransportMetrics metrics) {
        this.pd = pd;
        this.accessFlags = accessFlags;
        this.slotSize = slotSize;
        this.metrics = metrics;
    }

    int slotSize() {
        return slotSize;
    }

    /** Slots registered so far. */
    int slots() {
        return chunks.length * CHUNK_SLOTS;
    }

    /** Registers one more chunk and returns it; its slots are numbered from the {@link #slots()} before. */
    Chunk grow() {
        MemorySegment memory = arena.allocate((long) CHUNK_SLOTS * slotSize, 4096);
        Verbs.MemoryRegion region = VerbsTransport.registerOrExplain(pd, memory, accessFlags);
        Chunk c = new Chunk(memory, region);
        Chunk[] grown = Arrays.copyOf(chunks, chunks.length + 1);
        grown[chunks.length] = c;
        chunks = grown;
        registeredBytes += memory.byteSize();
        metrics.messageBuffersRegistered(memory.byteSize());
        return c;
    }

    /** Slot {@code slot}'s bytes. */
    MemorySegment slot(int slot) {
        return chunks[slot / CHUNK_SLOTS].memory().asSlice((long) (slot % CHUNK_SLOTS) * slotSize, slotSize);
    }

    /** The local key of slot {@code slot}'s registration. */
    int lkey(int slot) {
        return chunks[slot / CHUNK_SLOTS].region().lkey();
    }

    /** Only once no queue pair can touch the slots any more. */
    @Override
    public void close() {
        for (Chunk c : chunks) {
            Verbs.deregisterMemory(c.region());
        }
        chunks = new Chunk[0];
        metrics.messageBuffersDeregistered(registeredBytes);
        registeredBytes = 0;
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
