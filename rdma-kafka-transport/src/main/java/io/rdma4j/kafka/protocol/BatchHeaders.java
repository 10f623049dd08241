package io.rdma4j.kafka.protocol;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Reads the few fixed fields of a v2 record batch header straight from log bytes, so the exporter can
 * walk a segment batch by batch without parsing records (Kafka 4.x logs hold only magic v2 batches).
 */
public final class BatchHeaders {

    /** baseOffset(8) + batchLength(4): the batch length counts the bytes after these 12. */
    public static final int LOG_OVERHEAD = BatchLayout.LOG_OVERHEAD;
    /** Bytes up to and including lastOffsetDelta. */
    public static final int HEADER_PREFIX = BatchLayout.BASE_TIMESTAMP;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private BatchHeaders() {
    }

    /** The result of a walk: where it stopped and the offset the next batch would start at. */
    public record Position(long bytePosition, long nextOffset) {
    }

    /**
     * Walks whole batches from {@code start} while they end at or before {@code limit} and their last
     * offset is below {@code stopOffset}.
     *
     * @param nextOffset the next offset at {@code start} (used when no batch is passed)
     */
    public static Position walk(MemorySegment log, long start, long nextOffset, long limit, long stopOffset) {
        long pos = start;
        long next = nextOffset;
        long end = Math.min(limit, log.byteSize());
        while (pos + HEADER_PREFIX <= end) {
            if (log.get(ValueLayout.JAVA_BYTE, pos + BatchLayout.MAGIC) != BatchLayout.MAGIC_V2) {
                break; // Not a v2 batch: nothing past here is served.
            }
            long base = log.get(LONG, pos + BatchLayout.BASE_OFFSET);
            long batchEnd = pos + LOG_OVERHEAD + (log.get(INT, pos + BatchLayout.BATCH_LENGTH) & 0xffffffffL);
            long lastOffset = base + log.get(INT, pos + BatchLayout.LAST_OFFSET_DELTA);
            if (batchEnd > end || lastOffset >= stopOffset) {
                break;
            }
            pos = batchEnd;
            next = lastOffset + 1;
        }
        return new Position(pos, next);
    }

    /** Total bytes of the batch at {@code pos} (header included), or -1 if fewer than 12 bytes remain. */
    public static long batchSize(MemorySegment log, long pos) {
        if (pos + LOG_OVERHEAD > log.byteSize()) {
            return -1;
        }
        return LOG_OVERHEAD + (log.get(INT, pos + BatchLayout.BATCH_LENGTH) & 0xffffffffL);
    }
}
