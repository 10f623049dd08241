package io.rdma4j.spark;

import io.rdma4j.core.ProtocolException;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;

/**
 * The layout of the files Spark's sort shuffle writes beside each map output's data file, as
 * {@code IndexShuffleBlockResolver} writes them: the index holds {@code partitions + 1} big-endian longs, the offsets
 * of the partitions' blocks in the data file (block {@code r} spans entries {@code r} to {@code r + 1}); the checksum
 * file holds one big-endian long per partition. Every reader of those files, local or by one-sided READ, goes
 * through here.
 */
final class ShuffleIndexFormat {

    /** Bytes of one index or checksum entry. */
    static final int ENTRY_BYTES = 8;
    /** The largest block Spark takes in memory (a byte array's limit). */
    static final long MAX_BLOCK_BYTES = Integer.MAX_VALUE - 512;

    private static final ValueLayout.OfLong ENTRY = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private ShuffleIndexFormat() {
    }

    /** Where partition {@code partition}'s entry is in the index file, as in the checksum file. */
    static long entryOffset(int partition) {
        return (long) ENTRY_BYTES * partition;
    }

    /** Bytes of the index entries that bound the blocks of partitions {@code min} to {@code max}. */
    static long indexBytes(int min, int max) {
        return (long) ENTRY_BYTES * (max - min + 2);
    }

    /** Bytes of the checksums of partitions {@code min} to {@code max}. */
    static long checksumBytes(int min, int max) {
        return (long) ENTRY_BYTES * (max - min + 1);
    }

    /** Entry {@code i} of the entries held at {@code at} in {@code segment} (an index or checksum file, or a copy). */
    static long entry(MemorySegment segment, long at, int i) {
        return segment.get(ENTRY, at + (long) ENTRY_BYTES * i);
    }

    /** The {@code count} entries held at {@code at} in {@code segment}. */
    static long[] entries(MemorySegment segment, long at, int count) {
        long[] entries = new long[count];
        for (int i = 0; i < count; i++) {
            entries[i] = entry(segment, at, i);
        }
        return entries;
    }

    /**
     * The index entries bounding partitions {@code min} to {@code max}, read from an index file.
     *
     * @throws ProtocolException the file ends before them
     */
    static long[] readIndex(FileChannel index, int min, int max, Object name) throws IOException {
        ByteBuffer b = ByteBuffer.allocate((int) indexBytes(min, max)); // big-endian, as the file
        while (b.hasRemaining()) {
            if (index.read(b, entryOffset(min) + b.position()) < 0) {
                throw new ProtocolException("index file " + name + " ends before the entries of partition " + max);
            }
        }
        b.flip();
        long[] entries = new long[max - min + 2];
        for (int i = 0; i < entries.length; i++) {
            entries[i] = b.getLong();
        }
        return entries;
    }

    /**
     * Checks index entries (block offsets into a data file, for consecutive partitions) before they size a buffer or
     * a mapping: they start at or after 0, never decrease, end within the data file's {@code dataLength} bytes, and
     * no block exceeds {@link #MAX_BLOCK_BYTES}.
     *
     * @throws ProtocolException for entries no Spark index file holds
     */
    static void checkEntries(long[] entries, long dataLength) {
        if (entries[0] < 0) {
            throw new ProtocolException("index entry " + entries[0] + " is negative");
        }
        for (int i = 1; i < entries.length; i++) {
            if (entries[i] < entries[i - 1]) {
                throw new ProtocolException("index entries decrease from " + entries[i - 1] + " to " + entries[i]);
            }
            long length = entries[i] - entries[i - 1]; // both at least 0: no overflow
            if (length > MAX_BLOCK_BYTES) {
                throw new ProtocolException("index entries give a block of " + length + " bytes, more than the "
                        + MAX_BLOCK_BYTES + " a block may have");
            }
        }
        if (entries[entries.length - 1] > dataLength) {
            throw new ProtocolException("index entry " + entries[entries.length - 1] + " is beyond the data file's "
                    + dataLength + " bytes");
        }
    }
}
