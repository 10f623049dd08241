package io.rdma4j.kafka.protocol;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.zip.CRC32C;

/**
 * The per-partition record the exporter publishes in a registered region and consumers read one-sided.
 * Nothing at or above {@code highWatermark} may be served: {@code hwPosition} is the byte position in
 * segment {@code hwSegmentBase} where the first batch at or above the high watermark starts.
 *
 * <p>Layout (big-endian): magic(4) version(4) then the nine longs below, then a CRC32C of the preceding
 * bytes (4) and padding. The exporter rewrites it in place while peers may be reading it, so a reader
 * that sees a CRC mismatch has caught it mid-update and simply reads again.
 *
 * @param generation bumped whenever the partition's segment list changes (roll, deletion, compaction)
 * @param leaderId   the node id of the partition's leader as the exporter last learnt it from the cluster, or
 *                   {@link #UNKNOWN_LEADER}: a consumer that chose this exporter as the leader's moves when it differs
 */
public record Watermark(long highWatermark, long hwSegmentBase, long hwPosition, long logStartOffset,
                        long lastStableOffset, long activeSegmentBase, long generation, long updatedAtMillis,
                        int leaderId) {

    public static final int UNKNOWN_LEADER = -1;

    public static final int SIZE = 96;
    private static final int MAGIC = 0x524B574D; // "RKWM"
    private static final int VERSION = 2;
    private static final int CRC_OFFSET = 8 + 9 * 8;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** Writes this record into {@code target} (at least {@link #SIZE} bytes). */
    public void writeTo(MemorySegment target) {
        // Invalidate first so a reader racing with the update fails the CRC rather than mixing versions.
        target.set(INT, CRC_OFFSET, 0);
        target.set(INT, 0, MAGIC);
        target.set(INT, 4, VERSION);
        long[] fields = fields();
        for (int i = 0; i < fields.length; i++) {
            target.set(LONG, 8 + 8L * i, fields[i]);
        }
        target.set(INT, CRC_OFFSET, crc(target));
    }

    /**
     * Decodes a record, or returns {@code null} when it was caught mid-update (CRC mismatch).
     *
     * @throws IllegalArgumentException when the bytes are not a watermark record at all
     */
    public static Watermark readFrom(MemorySegment source) {
        if (source.byteSize() < SIZE) {
            throw new IllegalArgumentException("watermark record needs " + SIZE + " bytes, got " + source.byteSize());
        }
        if (source.get(INT, CRC_OFFSET) != crc(source)) {
            return null;
        }
        if (source.get(INT, 0) != MAGIC || source.get(INT, 4) != VERSION) {
            throw new IllegalArgumentException("not an rdma4j watermark record (bad magic or version): "
                    + "the exporter and the consumer must run the same rdma4j version");
        }
        return new Watermark(source.get(LONG, 8), source.get(LONG, 16), source.get(LONG, 24), source.get(LONG, 32),
                source.get(LONG, 40), source.get(LONG, 48), source.get(LONG, 56), source.get(LONG, 64),
                (int) source.get(LONG, 72));
    }

    private long[] fields() {
        return new long[] {highWatermark, hwSegmentBase, hwPosition, logStartOffset, lastStableOffset,
                activeSegmentBase, generation, updatedAtMillis, leaderId};
    }

    private static int crc(MemorySegment s) {
        CRC32C crc = new CRC32C();
        crc.update(s.asSlice(0, CRC_OFFSET).asByteBuffer());
        return (int) crc.getValue();
    }
}
