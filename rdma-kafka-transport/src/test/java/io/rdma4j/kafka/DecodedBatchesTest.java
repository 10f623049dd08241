package io.rdma4j.kafka;

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

    private static String value(ByteBuffer b) {
        return StandardCharsets.UTF_8.decode(b.duplicate()).toString();
    }
}
