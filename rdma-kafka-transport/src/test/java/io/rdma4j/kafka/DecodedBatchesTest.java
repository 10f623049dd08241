package io.rdma4j.kafka;

import io.rdma4j.kafka.protocol.InflateArrays;
import io.rdma4j.kafka.protocol.TestBatches;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.utils.BufferSupplier;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** A range's batches decoded ahead or when asked: the same records either way, a corrupt one failing where reached. */
class DecodedBatchesTest {

    private static final ByteBuffer FIRST = TestBatches.data(0, 3, TestBatches.NO_PRODUCER, false);
    private static final ByteBuffer SECOND = TestBatches.data(3, 2, TestBatches.NO_PRODUCER, false);

    @Test
    void decodedAheadOrWhenAskedGiveTheSameRecordsAndAViewFromABatchBoundary() {
        MemorySegment range = MemorySegment.ofBuffer(TestBatches.concat(FIRST, SECOND));
        for (DecodedBatches d : new DecodedBatches[] {DecodedBatches.parse(range),
                DecodedBatches.decode(range, BufferSupplier.create())}) {
            assertThat(d.batches()).hasSize(2);
            d.ensureValid(1);
            assertThat(d.records(1, BufferSupplier.create())).extracting(r -> value(r.value())).containsExactly("v3", "v4");
            DecodedBatches second = d.from(FIRST.remaining());
            assertThat(second.batches()).hasSize(1);
            assertThat(second.records(0, BufferSupplier.create())).as("kept from before").extracting(r -> value(r.value()))
                    .containsExactly("v3", "v4");
            assertThat(d.from(5)).as("no batch starts at byte 5").isNull();
        }
    }

    @Test
    void aCorruptBatchFailsWhereTheConsumerReachesItNotBefore() {
        ByteBuffer corrupt = TestBatches.concat(FIRST, SECOND);
        int lastByte = corrupt.limit() - 1;
        corrupt.put(lastByte, (byte) (corrupt.get(lastByte) ^ 0x55)); // in the second batch's records: its CRC fails
        DecodedBatches ahead = DecodedBatches.decode(MemorySegment.ofBuffer(corrupt), BufferSupplier.create());
        ahead.ensureValid(0);
        assertThat(ahead.records(0, BufferSupplier.create())).hasSize(3);
        assertThatThrownBy(() -> ahead.ensureValid(1)).isInstanceOf(CorruptRecordException.class);
        DecodedBatches asked = DecodedBatches.parse(MemorySegment.ofBuffer(corrupt));
        assertThatThrownBy(() -> asked.records(1, BufferSupplier.create())).as("records before a check")
                .isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> asked.ensureValid(1)).isInstanceOf(CorruptRecordException.class);
    }

    /**
     * Once its records are converted, a compressed batch's array goes back to the pool, where a later batch may
     * overwrite it; asked for again, the batch is inflated again. An uncompressed batch, read in place, gives nothing.
     */
    @Test
    void aConvertedBatchGivesItsArrayBackAndInflatesAgainIfAskedAgain() {
        InflateArrays arrays = new InflateArrays(1 << 20);
        ByteBuffer lz4 = TestBatches.compressed(3, TestBatches.record(0, null, "v0".getBytes(StandardCharsets.UTF_8)),
                TestBatches.record(1, null, "v1".getBytes(StandardCharsets.UTF_8)));
        DecodedBatches d = DecodedBatches.decode(MemorySegment.ofBuffer(TestBatches.concat(lz4, SECOND)), BufferSupplier.create(), arrays);
        d.ensureValid(0);
        assertThat(d.records(0, BufferSupplier.create())).extracting(r -> value(r.value())).containsExactly("v0", "v1");
        d.converted(0);
        assertThat(arrays.pooledBytes()).as("given back").isPositive();
        byte[] reused = arrays.take(1);
        java.util.Arrays.fill(reused, (byte) 'x'); // a later batch's bytes
        arrays.giveBack(reused);
        assertThat(d.records(0, BufferSupplier.create())).as("inflated again").extracting(r -> value(r.value()))
                .containsExactly("v0", "v1");
        d.ensureValid(1);
        d.records(1, BufferSupplier.create());
        d.converted(1);
        assertThat(arrays.pooledBytes()).as("nothing from an uncompressed batch").isZero();
    }

    private static String value(ByteBuffer b) {
        return StandardCharsets.UTF_8.decode(b.duplicate()).toString();
    }
}
