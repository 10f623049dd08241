package io.rdma4j.it.bench;

import io.rdma4j.core.RequestTypes;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** What every transport benchmark moves: reads from a region of known content, and echoed requests. */
final class Transfers {

    static final long REGION = 64L << 20;
    static final int SMALL = 64;
    static final int LARGE = 1 << 20;
    /** Each small read starts a page further, so reads do not keep hitting the same cache lines. */
    static final long STRIDE = 4096;
    /** The request type both sides answer by echoing the body. */
    static final int ECHO = RequestTypes.FIRST_APPLICATION_TYPE;

    private Transfers() {
    }

    /** A page-aligned {@link #REGION} of bytes that differ from one offset to the next, so a wrong read shows. */
    static MemorySegment filledRegion(Arena arena) {
        MemorySegment data = arena.allocate(REGION, 4096);
        for (long i = 0; i < REGION; i += 8) {
            data.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
        }
        return data;
    }

    /** The offset after {@code offset} for transfers of {@code bytes}, wrapping before the end of the region. */
    static long next(long offset, long bytes) {
        long following = offset + bytes;
        return following + bytes > REGION ? 0 : following;
    }

    /** Fails the benchmark when a read brought other bytes than the region holds: the figures would be of a broken transfer. */
    static void requireSame(MemorySegment read, MemorySegment expected, String what) {
        long mismatch = read.mismatch(expected);
        if (mismatch != -1) {
            throw new IllegalStateException(what + ": read differs from the region at byte " + mismatch);
        }
    }
}
