package io.rdma4j.kafka.protocol;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.ByteBufferOutputStream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class RecordBatchParserInflateTest {

    /** Zeros compress far beyond the first size guess, so the inflated array has to grow; empty and null values too. */
    @ParameterizedTest
    @ValueSource(ints = {1, 2, 3, 4}) // gzip, snappy, lz4, zstd: the codec bits of a batch's attributes
    void compressedBatchesInflateWholeWithAndWithoutReusedBuffers(int codec) throws IOException {
        byte[] zeros = new byte[300 * 1024];
        byte[] text = "a value of some length".repeat(50).getBytes(StandardCharsets.UTF_8);
        byte[][] keys = {"k0".getBytes(StandardCharsets.UTF_8), null, "k2".getBytes(StandardCharsets.UTF_8), null};
        byte[][] values = {zeros, new byte[0], null, text};
        Compression compression = switch (codec) {
            case 1 -> Compression.gzip().build();
            case 2 -> Compression.snappy().build();
            case 3 -> Compression.lz4().build();
            default -> Compression.zstd().build();
        };
        ByteBufferOutputStream compressed = new ByteBufferOutputStream(1024);
        try (OutputStream out = compression.wrapForOutput(compressed, (byte) 2)) {
            for (int i = 0; i < keys.length; i++) {
                out.write(TestBatches.record(i, keys[i], values[i]));
            }
        }
        ByteBuffer c = compressed.buffer().flip();
        byte[] compressedRecords = new byte[c.remaining()];
        c.get(compressedRecords);
        ByteBuffer batch = TestBatches.batch(0, codec, TestBatches.NO_PRODUCER, keys.length - 1, keys.length, compressedRecords);
        try (BufferSupplier reused = BufferSupplier.create()) {
            for (BufferSupplier buffers : List.of(BufferSupplier.NO_CACHING, reused, reused)) {
                RecordBatchParser.Batch parsed = RecordBatchParser.batches(batch).getFirst();
                parsed.ensureValid();
                List<RecordBatchParser.ParsedRecord> records = parsed.records(buffers);
                assertThat(records).hasSize(4);
                assertThat(records.stream().map(RecordBatchParser.ParsedRecord::offset).toList()).containsExactly(0L, 1L, 2L, 3L);
                assertThat(bytes(records.get(0).key())).isEqualTo(keys[0]);
                assertThat(bytes(records.get(0).value())).isEqualTo(zeros);
                assertThat(records.get(1).key()).isNull();
                assertThat(bytes(records.get(1).value())).isEmpty();
                assertThat(records.get(2).value()).isNull();
                assertThat(bytes(records.get(3).value())).isEqualTo(text);
            }
        }
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }
}
