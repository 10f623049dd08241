package io.rdma4j.kafka.protocol;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.ByteUtils;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * Parses magic v2 record batches in place from a (registered) buffer. Kafka's own batch classes moved
 * from {@code org.apache.kafka.common.record} to {@code ...record.internal} in 4.3, so no batch class
 * exists in both the 4.2 and 4.3 clients; the v2 format itself is stable and small, and decompression
 * uses Kafka's {@link Compression}, which both versions have. CRC32C is checked before anything is read.
 */
public final class RecordBatchParser {

    /** A control record's key: version int16, type int16. */
    private static final int CONTROL_KEY_BYTES = 4;
    /** {@code ControlRecordType.ABORT}'s type id. */
    private static final short ABORT_CONTROL_TYPE = 0;
    private static final Header[] NO_HEADERS = new Header[0];
    /** The smallest v2 record: seven one-byte fields (length, attributes, deltas, key and value lengths, header count). */
    static final int MIN_RECORD_BYTES = 7;

    private RecordBatchParser() {
    }

    /** One v2 batch, a view of the buffer it was parsed from. */
    public record Batch(ByteBuffer bytes) {
        public long baseOffset() { return bytes.getLong(BatchLayout.BASE_OFFSET); }
        public int sizeInBytes() { return bytes.limit(); }
        public int partitionLeaderEpoch() { return bytes.getInt(BatchLayout.PARTITION_LEADER_EPOCH); }
        public int attributes() { return bytes.getShort(BatchLayout.ATTRIBUTES); }
        public long lastOffset() { return baseOffset() + bytes.getInt(BatchLayout.LAST_OFFSET_DELTA); }
        public long nextOffset() { return lastOffset() + 1; }
        public long baseTimestamp() { return bytes.getLong(BatchLayout.BASE_TIMESTAMP); }
        public long maxTimestamp() { return bytes.getLong(BatchLayout.MAX_TIMESTAMP); }
        public int recordCount() { return bytes.getInt(BatchLayout.RECORD_COUNT); }
        public boolean isControlBatch() { return (attributes() & BatchLayout.CONTROL) != 0; }
        public boolean isTransactional() { return (attributes() & BatchLayout.TRANSACTIONAL) != 0; }
        /** The producer of the batch; negative (-1) for batches written without one. */
        public long producerId() { return bytes.getLong(BatchLayout.PRODUCER_ID); }

        /**
         * Whether this is a control batch whose first record is an abort marker, its key read as Kafka's
         * {@code ControlRecordType.parse} reads it: version int16 (not negative), type int16 (0 = abort).
         *
         * @throws CorruptRecordException for a control record key no broker writes
         */
        public boolean isAbortMarker() {
            if (!isControlBatch()) {
                return false;
            }
            List<ParsedRecord> records = records();
            if (records.isEmpty()) {
                return false;
            }
            ByteBuffer key = records.getFirst().key();
            if (key == null || key.remaining() < CONTROL_KEY_BYTES) {
                throw new CorruptRecordException("control record at offset " + records.getFirst().offset() + " has a key of "
                        + (key == null ? "null" : key.remaining() + " bytes") + ", fewer than " + CONTROL_KEY_BYTES);
            }
            short version = key.getShort(key.position());
            if (version < 0) {
                throw new CorruptRecordException("control record at offset " + records.getFirst().offset()
                        + " has a negative key version " + version);
            }
            return key.getShort(key.position() + 2) == ABORT_CONTROL_TYPE;
        }
        public TimestampType timestampType() {
            return (attributes() & 0x08) != 0 ? TimestampType.LOG_APPEND_TIME : TimestampType.CREATE_TIME;
        }

        /** Verifies the CRC32C over attributes..end, as {@code RecordBatch.ensureValid()} does. */
        public void ensureValid() {
            if (bytes.limit() < BatchLayout.RECORDS) {
                throw new CorruptRecordException("record batch of " + bytes.limit() + " bytes is shorter than its header");
            }
            CRC32C crc = new CRC32C();
            crc.update(bytes.duplicate().position(BatchLayout.ATTRIBUTES));
            long stored = bytes.getInt(BatchLayout.CRC) & 0xffffffffL;
            if (crc.getValue() != stored) {
                throw new CorruptRecordException("record batch at offset " + baseOffset() + " is corrupt (stored crc = "
                        + stored + ", computed crc = " + crc.getValue() + ")");
            }
        }

        /** The records; uncompressed batches are read in place, compressed ones inflated with Kafka's codecs. */
        public List<ParsedRecord> records() {
            return records(BufferSupplier.NO_CACHING);
        }

        /**
         * As {@link #records()}, the codecs taking their working buffers from {@code decompressionBuffers}: a caching
         * supplier (one per thread, as it is not thread-safe) saves allocating e.g. lz4's 64 KiB block buffer per batch.
         */
        public List<ParsedRecord> records(BufferSupplier decompressionBuffers) {
            return records(decompressionBuffers, InflateArrays.NONE).records();
        }

        /**
         * As {@link #records(BufferSupplier)}, a compressed batch inflated into an array of {@code arrays}, which the
         * result names so that the caller can give it back once it has used the records.
         */
        public Parsed records(BufferSupplier decompressionBuffers, InflateArrays arrays) {
            ByteBuffer records = bytes.duplicate().position(BatchLayout.RECORDS).slice().order(ByteOrder.BIG_ENDIAN);
            int codec = attributes() & 0x07;
            byte[] inflatedInto = null;
            if (codec != 0) {
                records = inflate(codec, records, decompressionBuffers, arrays);
                inflatedInto = records.array();
            }
            int count = recordCount();
            // a record takes at least MIN_RECORD_BYTES: a count beyond what the bytes can hold sizes nothing
            if (count < 0 || count > records.remaining() / MIN_RECORD_BYTES) {
                throw new CorruptRecordException("record batch at offset " + baseOffset() + " claims " + count
                        + " records in " + records.remaining() + " bytes");
            }
            List<ParsedRecord> out = new ArrayList<>(count);
            long logAppendTime = timestampType() == TimestampType.LOG_APPEND_TIME ? maxTimestamp() : -1;
            try {
                for (int i = 0; i < count; i++) {
                    out.add(readRecord(records, logAppendTime));
                }
            } catch (RuntimeException e) {
                throw new CorruptRecordException("malformed record in the batch at offset " + baseOffset() + ": " + e);
            }
            return new Parsed(out, inflatedInto);
        }

        private ParsedRecord readRecord(ByteBuffer in, long logAppendTime) {
            int length = ByteUtils.readVarint(in);
            int end = in.position() + length;
            in.get(); // attributes: unused in v2
            long timestampDelta = ByteUtils.readVarlong(in);
            int offsetDelta = ByteUtils.readVarint(in);
            ByteBuffer key = slice(in, ByteUtils.readVarint(in));
            ByteBuffer value = slice(in, ByteUtils.readVarint(in));
            int headerCount = ByteUtils.readVarint(in);
            // each header takes at least two bytes (two lengths); no length is allocated before it is checked
            if (headerCount < 0 || headerCount > in.remaining() / 2) {
                throw new IllegalStateException(headerCount + " headers in " + in.remaining() + " bytes");
            }
            Header[] headers = headerCount == 0 ? NO_HEADERS : new Header[headerCount];
            for (int h = 0; h < headerCount; h++) {
                byte[] name = new byte[within(in, ByteUtils.readVarint(in))];
                in.get(name);
                int valueLength = ByteUtils.readVarint(in);
                byte[] headerValue = null;
                if (valueLength >= 0) {
                    headerValue = new byte[within(in, valueLength)];
                    in.get(headerValue);
                }
                headers[h] = new RecordHeader(new String(name, StandardCharsets.UTF_8), headerValue);
            }
            if (in.position() != end) {
                throw new IllegalStateException("record length " + length + " does not match its fields");
            }
            long timestamp = logAppendTime >= 0 ? logAppendTime : baseTimestamp() + timestampDelta;
            return new ParsedRecord(baseOffset() + offsetDelta, timestamp, key, value, headers);
        }

        /** {@code length}, once checked against what {@code in} still holds. */
        private static int within(ByteBuffer in, int length) {
            if (length < 0 || length > in.remaining()) {
                throw new IllegalStateException("a field of " + length + " bytes in " + in.remaining());
            }
            return length;
        }

        private static ByteBuffer slice(ByteBuffer in, int length) {
            if (length < 0) {
                return null;
            }
            ByteBuffer s = in.slice(in.position(), length);
            in.position(in.position() + length);
            return s;
        }

        private ByteBuffer inflate(int codec, ByteBuffer compressed, BufferSupplier decompressionBuffers, InflateArrays arrays) {
            Compression compression = switch (codec) {
                case 1 -> Compression.gzip().build();
                case 2 -> Compression.snappy().build();
                case 3 -> Compression.lz4().build();
                case 4 -> Compression.zstd().build();
                default -> throw new CorruptRecordException("unknown compression codec " + codec + " in batch at offset " + baseOffset());
            };
            try (InputStream in = compression.wrapForInput(compressed, (byte) 2, decompressionBuffers)) {
                return readFully(in, compressed.remaining(), arrays);
            } catch (IOException | RuntimeException e) {
                throw new CorruptRecordException("cannot decompress the batch at offset " + baseOffset() + ": " + e);
            }
        }
    }

    /**
     * All of {@code in} in one array of {@code arrays}, at least a few times the compressed bytes, grown by doubling
     * (the outgrown one given back): {@code readAllBytes} collects 16 KiB chunks and then copies them into a further
     * array. The buffer returned ends at the last byte inflated.
     */
    private static ByteBuffer readFully(InputStream in, int compressedBytes, InflateArrays arrays) throws IOException {
        byte[] out = arrays.take((int) Math.min(Math.max(4096L, 4L * compressedBytes), INFLATE_FIRST_GUESS_MAX));
        int n = 0;
        while (true) {
            if (n == out.length) {
                if (out.length >= MAX_ARRAY) {
                    throw new IOException("a batch inflates to more than " + MAX_ARRAY + " bytes");
                }
                byte[] outgrown = out;
                out = Arrays.copyOf(out, (int) Math.min(2L * out.length, MAX_ARRAY));
                arrays.giveBack(outgrown);
            }
            int read = in.read(out, n, out.length - n);
            if (read < 0) {
                return ByteBuffer.wrap(out, 0, n).slice();
            }
            n += read;
        }
    }

    /** The largest first guess: a tiny batch claiming huge ratios grows the array rather than allocating it up front. */
    private static final int INFLATE_FIRST_GUESS_MAX = 8 << 20;
    private static final int MAX_ARRAY = Integer.MAX_VALUE - 8;

    /**
     * The records of one batch, and the array of {@link InflateArrays} they were inflated into (null for an uncompressed
     * batch, read in place), to give back once nothing reads them.
     */
    public record Parsed(List<ParsedRecord> records, byte[] inflatedInto) {
    }

    /** One record; key and value are views (of the registered buffer when uncompressed), null when absent. */
    public record ParsedRecord(long offset, long timestamp, ByteBuffer key, ByteBuffer value, Header[] headers) {
    }

    /** The whole batches at the start of {@code buffer}; a partial batch at the end is left out. */
    public static List<Batch> batches(ByteBuffer buffer) {
        ByteBuffer in = buffer.duplicate().order(ByteOrder.BIG_ENDIAN);
        List<Batch> out = new ArrayList<>();
        int pos = 0;
        while (pos + BatchHeaders.LOG_OVERHEAD <= in.limit()) {
            long size = BatchLayout.LOG_OVERHEAD + (in.getInt(pos + BatchLayout.BATCH_LENGTH) & 0xffffffffL);
            if (pos + size > in.limit()) {
                break;
            }
            if (in.get(pos + BatchLayout.MAGIC) != BatchLayout.MAGIC_V2) {
                throw new CorruptRecordException("unsupported record batch magic " + in.get(pos + BatchLayout.MAGIC) + " at byte " + pos
                        + ": only v2 batches (Kafka 0.11+) are served by RDMA");
            }
            out.add(new Batch(in.slice(pos, (int) size).order(ByteOrder.BIG_ENDIAN)));
            pos += (int) size;
        }
        return out;
    }
}
