package io.rdma4j.kafka.protocol;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.utils.ByteBufferOutputStream;
import org.apache.kafka.common.utils.ByteUtils;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32C;

/** Magic v2 record batches built byte by byte, with a valid CRC32C, for tests that need exact headers. */
public final class TestBatches {

    public static final int TRANSACTIONAL = 0x10;
    public static final int CONTROL = 0x20;
    /** Written without a producer: Kafka's {@code RecordBatch.NO_PRODUCER_ID}. */
    public static final long NO_PRODUCER = -1;
    private static final int HEADER_BYTES = 61;

    private TestBatches() {
    }

    /** A batch at {@code baseOffset} whose header claims {@code recordCount} records and holds {@code records} as their bytes. */
    public static ByteBuffer batch(long baseOffset, int attributes, long producerId, int lastOffsetDelta, int recordCount, byte[] records) {
        ByteBuffer b = ByteBuffer.allocate(HEADER_BYTES + records.length);
        b.putLong(baseOffset).putInt(HEADER_BYTES + records.length - BatchHeaders.LOG_OVERHEAD).putInt(0).put((byte) 2)
                .putInt(0).putShort((short) attributes).putInt(lastOffsetDelta).putLong(0).putLong(0).putLong(producerId)
                .putShort((short) (producerId < 0 ? -1 : 0)).putInt(producerId < 0 ? -1 : 0).putInt(recordCount).put(records);
        CRC32C crc = new CRC32C();
        crc.update(b.duplicate().position(21).limit(b.capacity()));
        b.putInt(17, (int) crc.getValue());
        return b.flip();
    }

    /** A data batch of {@code count} records with values {@code "v<offset>"}. */
    public static ByteBuffer data(long baseOffset, int count, long producerId, boolean transactional) {
        ByteArrayOutputStream records = new ByteArrayOutputStream();
        for (int i = 0; i < count; i++) {
            records.writeBytes(record(i, null, ("v" + (baseOffset + i)).getBytes(StandardCharsets.UTF_8)));
        }
        return batch(baseOffset, transactional ? TRANSACTIONAL : 0, producerId, count - 1, count, records.toByteArray());
    }

    /**
     * A batch at offset 0 of the records {@code records} (each from {@link #record}, and counted as one record each)
     * compressed with {@code codec}, the codec bits of a batch's attributes: 1 gzip, 2 snappy, 3 lz4, 4 zstd.
     */
    public static ByteBuffer compressed(int codec, byte[]... records) {
        Compression compression = switch (codec) {
            case 1 -> Compression.gzip().build();
            case 2 -> Compression.snappy().build();
            case 3 -> Compression.lz4().build();
            case 4 -> Compression.zstd().build();
            default -> throw new IllegalArgumentException("codec " + codec);
        };
        ByteBufferOutputStream compressed = new ByteBufferOutputStream(1024);
        try (OutputStream out = compression.wrapForOutput(compressed, (byte) 2)) {
            for (byte[] r : records) {
                out.write(r);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        ByteBuffer c = compressed.buffer().flip();
        byte[] bytes = new byte[c.remaining()];
        c.get(bytes);
        return batch(0, codec, NO_PRODUCER, records.length - 1, records.length, bytes);
    }

    /** A transaction marker (control batch of one record) of {@code producerId}: abort or commit. */
    public static ByteBuffer marker(long offset, long producerId, boolean abort) {
        return control(offset, producerId, new byte[] {0, 0, 0, (byte) (abort ? 0 : 1)});
    }

    /** A control batch of one record with {@code key} as its control key. */
    public static ByteBuffer control(long offset, long producerId, byte[] key) {
        byte[] value = {0, 0, 0, 0, 0, 0}; // version int16, coordinator epoch int32
        return batch(offset, TRANSACTIONAL | CONTROL, producerId, 0, 1, record(0, key, value));
    }

    /** One v2 record: attributes 0, timestamp delta 0, no headers. */
    public static byte[] record(int offsetDelta, byte[] key, byte[] value) {
        ByteBuffer body = ByteBuffer.allocate(64 + (key == null ? 0 : key.length) + (value == null ? 0 : value.length));
        body.put((byte) 0);
        ByteUtils.writeVarlong(0, body);
        ByteUtils.writeVarint(offsetDelta, body);
        writeBytes(key, body);
        writeBytes(value, body);
        ByteUtils.writeVarint(0, body);
        body.flip();
        ByteBuffer out = ByteBuffer.allocate(5 + body.remaining());
        ByteUtils.writeVarint(body.remaining(), out);
        out.put(body).flip();
        byte[] bytes = new byte[out.remaining()];
        out.get(bytes);
        return bytes;
    }

    private static void writeBytes(byte[] b, ByteBuffer out) {
        if (b == null) {
            ByteUtils.writeVarint(-1, out);
        } else {
            ByteUtils.writeVarint(b.length, out);
            out.put(b);
        }
    }

    /** The batches one after another, as a segment holds them. */
    public static ByteBuffer concat(ByteBuffer... batches) {
        int size = 0;
        for (ByteBuffer b : batches) {
            size += b.remaining();
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        for (ByteBuffer b : batches) {
            out.put(b.duplicate());
        }
        return out.flip();
    }
}
