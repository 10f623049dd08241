package io.rdma4j.core.internal;

import java.lang.foreign.MemorySegment;

/**
 * Refuses memory only one thread may touch. The transport's own threads read and write registered regions and the
 * buffers of operations (the tcp provider copies into a read's sink on its reader thread), so a segment of
 * {@code Arena.ofConfined()} would fail there with a {@link WrongThreadException}, far from the call that passed it.
 */
final class SharedMemory {

    /** Never started: only asks whether a segment is usable by a thread other than its owner. */
    private static final Thread ANOTHER_THREAD = Thread.ofVirtual().unstarted(() -> { });

    private SharedMemory() {
    }

    static void require(MemorySegment segment, String what) {
        if (!segment.isAccessibleBy(ANOTHER_THREAD)) {
            throw new IllegalArgumentException(what + " is confined to one thread, but the transport's I/O threads "
                    + "access it: allocate it from Arena.ofShared(), Arena.ofAuto() or Arena.global() instead of "
                    + "Arena.ofConfined()");
        }
    }
}
