package io.rdma4j.kafka.protocol;

import java.nio.ByteBuffer;

/**
 * One entry of a segment's transaction index ({@code <base offset>.txnindex}), Kafka's on-disk record of an
 * aborted transaction whose abort marker lies in that segment. Layout (big-endian, {@value #SIZE} bytes):
 * version int16 (0), producerId int64, firstOffset int64, lastOffset int64 (the abort marker), lastStableOffset
 * int64 (the partition's last stable offset once the transaction completed). Entries are appended in marker order.
 */
public record TransactionIndexEntry(long producerId, long firstOffset, long lastOffset, long lastStableOffset) {

    public static final int SIZE = 34;
    /** Kafka's {@code AbortedTxn.CURRENT_VERSION}; Kafka itself rejects entries of a later version. */
    static final short CURRENT_VERSION = 0;

    /** Thrown for an entry that no broker writes. */
    public static final class MalformedEntryException extends IllegalStateException {
        MalformedEntryException(String message) {
            super(message);
        }
    }

    /**
     * Reads the entry at the buffer's position and advances it by {@value #SIZE}.
     *
     * @param segmentBase the base offset of the segment the index belongs to: every marker lies at or after it
     * @throws MalformedEntryException for an unknown version or offsets that contradict each other
     */
    public static TransactionIndexEntry read(ByteBuffer in, long segmentBase) {
        short version = in.getShort();
        TransactionIndexEntry e = new TransactionIndexEntry(in.getLong(), in.getLong(), in.getLong(), in.getLong());
        if (version < 0 || version > CURRENT_VERSION) {
            throw new MalformedEntryException("transaction index entry of version " + version + " (this reader knows "
                    + CURRENT_VERSION + ")");
        }
        if (e.producerId < 0 || e.firstOffset < 0 || e.lastOffset < e.firstOffset || e.lastOffset < segmentBase) {
            throw new MalformedEntryException("transaction index entry " + e + " of the segment at " + segmentBase
                    + " has contradicting offsets");
        }
        return e;
    }

    /** Whether the transaction overlaps {@code [fromOffset, toOffset)}, as Kafka's {@code collectAbortedTxns} tests it. */
    public boolean overlaps(long fromOffset, long toOffset) {
        return lastOffset >= fromOffset && firstOffset < toOffset;
    }

    /** The entry as a reply carries it. */
    public AbortedTransactions.Aborted aborted() {
        return new AbortedTransactions.Aborted(producerId, firstOffset, lastOffset);
    }
}
