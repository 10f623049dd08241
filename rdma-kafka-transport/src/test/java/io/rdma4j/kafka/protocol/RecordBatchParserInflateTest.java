package io.rdma4j.kafka.protocol;

import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.utils.BufferSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RecordBatchParserInflateTest {

    /** Zeros compress far beyond the first size guess, so the inflated array has to grow; empty and null values too. */
    @ParameterizedTest
    @ValueSource(ints = {1, 2, 3, 4}) // gzip, snappy, lz4, zstd: the codec bits of a batch's attributes
    void compressedBatchesInflateWholeWithAndWithoutReusedBuffers(int codec) {
        byte[] zeros = new byte[300 * 1024];
        byte[] text = "a value of some length".repeat(50).getBytes(StandardCharsets.UTF_8);
        byte[][] keys = {"k0".getBytes(StandardCharsets.UTF_8), null, "k2".getBytes(StandardCharsets.UTF_8), null};
        byte[][] values = {zeros, new byte[0], null, text};
        byte[][] raw = new byte[keys.length][];
        for (int i = 0; i < keys.length; i++) {
            raw[i] = TestBatches.record(i, keys[i], values[i]);
        }
        ByteBuffer batch = TestBatches.compressed(codec, raw);
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

    /**
     * A batch inflated into an array an earlier batch filled reads its own bytes only: its records are exact, and a
     * record whose value claims more bytes than the batch holds is corrupt, whatever the array holds beyond them.
     */
    @Test
    void aReusedArrayShowsNothingOfTheBatchInflatedIntoItBefore() {
        InflateArrays arrays = new InflateArrays(1 << 20);
        byte[] noise = new byte[3000]; // incompressible: the first guess (4 × compressed) holds it, so no array outgrown
        new SplittableRandom(7).nextBytes(noise);
        RecordBatchParser.Parsed first = only(TestBatches.compressed(3, TestBatches.record(0, null, noise)))
                .records(BufferSupplier.NO_CACHING, arrays);
        byte[] array = first.inflatedInto();
        assertThat(bytes(first.records().getFirst().value())).isEqualTo(noise);
        arrays.giveBack(array);

        RecordBatchParser.Parsed second = only(TestBatches.compressed(3,
                TestBatches.record(0, "k".getBytes(StandardCharsets.UTF_8), "vv".getBytes(StandardCharsets.UTF_8))))
                .records(BufferSupplier.NO_CACHING, arrays);
        assertThat(second.inflatedInto()).as("the array given back").isSameAs(array);
        assertThat(bytes(second.records().getFirst().value())).isEqualTo("vv".getBytes(StandardCharsets.UTF_8));
        arrays.giveBack(array);

        byte[] lying = TestBatches.record(0, "k".getBytes(StandardCharsets.UTF_8), "vv".getBytes(StandardCharsets.UTF_8));
        int valueLength = lying.length - 4; // ... key, value length (zigzag varint 4), "vv", header count
        assertThat(lying[valueLength]).isEqualTo((byte) 4);
        lying[valueLength] = 126; // 63 bytes: within what the array holds from the first batch
        RecordBatchParser.Batch corrupt = only(TestBatches.compressed(3, lying));
        assertThatThrownBy(() -> corrupt.records(BufferSupplier.NO_CACHING, arrays))
                .isInstanceOf(CorruptRecordException.class).hasMessageContaining("malformed record");
        assertThat(arrays.pooledBytes()).as("the array went to the corrupt batch").isZero();
    }

    @Test
    void thePoolKeepsArraysWithinItsBytesAndNoneLargerThanAQuarterOfThem() {
        InflateArrays arrays = new InflateArrays(1000);
        byte[] a = new byte[250];
        arrays.giveBack(new byte[251]);
        assertThat(arrays.pooledBytes()).as("over a quarter").isZero();
        arrays.giveBack(a);
        arrays.giveBack(new byte[250]);
        arrays.giveBack(new byte[250]);
        arrays.giveBack(new byte[250]);
        arrays.giveBack(new byte[10]);
        assertThat(arrays.pooledBytes()).as("full").isEqualTo(1000);
        assertThat(arrays.take(100)).as("the newest first").hasSize(250).isNotSameAs(a);
        assertThat(arrays.take(300)).as("too small: a new one").hasSize(300);
        assertThat(arrays.pooledBytes()).isEqualTo(500);
        InflateArrays.NONE.giveBack(new byte[1]);
        assertThat(InflateArrays.NONE.pooledBytes()).isZero();
    }

    private static RecordBatchParser.Batch only(ByteBuffer batch) {
        RecordBatchParser.Batch b = RecordBatchParser.batches(batch).getFirst();
        b.ensureValid();
        return b;
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }
}
