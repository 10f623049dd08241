package io.rdma4j.kafka;

import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.RecordBatchParser;
import io.rdma4j.kafka.protocol.TestBatches;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Which batches a read_committed consumer drops, decided as Kafka's CompletedFetch decides it. */
class ReadCommittedFilterTest {

    private static final long A = 7;
    private static final long B = 8;
    private static final long PLAIN = 9;

    private static RecordBatchParser.Batch parse(ByteBuffer b) {
        return RecordBatchParser.batches(b).getFirst();
    }

    /** Base offsets of the batches the filter keeps, control batches included (the caller skips those). */
    private static List<Long> kept(List<AbortedTransactions.Aborted> aborted, ByteBuffer... batches) {
        ReadCommittedFilter filter = new ReadCommittedFilter(aborted);
        List<Long> out = new ArrayList<>();
        for (ByteBuffer b : batches) {
            RecordBatchParser.Batch batch = parse(b);
            if (!filter.isAborted(batch)) {
                out.add(batch.baseOffset());
            }
        }
        return out;
    }

    @Test
    void interleavedProducersPlainWritesAndTwoTransactionsOfOneProducer() {
        // A: aborted [0..20], then committed [30..40]. B: committed [5..25]. PLAIN: idempotent, not transactional,
        // written in the middle of A's aborted transaction. A batch without a producer id too.
        List<Long> kept = kept(List.of(new AbortedTransactions.Aborted(A, 0, 20)),
                TestBatches.data(0, 2, A, true),
                TestBatches.data(2, 3, PLAIN, false),
                TestBatches.data(5, 2, B, true),
                TestBatches.data(7, 1, TestBatches.NO_PRODUCER, false),
                TestBatches.data(10, 4, A, true),
                TestBatches.marker(20, A, true),
                TestBatches.marker(25, B, false),
                TestBatches.data(30, 2, A, true),
                TestBatches.marker(40, A, false));
        assertThat(kept).containsExactly(2L, 5L, 7L, 20L, 25L, 30L, 40L);
    }

    @Test
    void aTransactionStartingBeforeTheRangeIsDroppedFromTheFirstBatch() {
        // the range starts at 50 in the middle of A's aborted transaction [10..70]
        assertThat(kept(List.of(new AbortedTransactions.Aborted(A, 10, 70)),
                TestBatches.data(50, 5, A, true), TestBatches.data(55, 5, PLAIN, false), TestBatches.marker(70, A, true),
                TestBatches.data(71, 2, A, true)))
                .containsExactly(55L, 70L, 71L);
    }

    @Test
    void aProducersBatchesBeforeItsAbortedTransactionStartsAreKept() {
        // A's committed batch at 0 comes before the aborted transaction starting at 10; without a marker between
        // them (a broker always writes one) only the first offset tells them apart
        assertThat(kept(List.of(new AbortedTransactions.Aborted(A, 10, 20)),
                TestBatches.data(0, 2, A, true), TestBatches.data(10, 2, A, true), TestBatches.marker(20, A, true)))
                .containsExactly(0L, 20L);
    }

    @Test
    void withoutAbortedTransactionsNothingIsDropped() {
        assertThat(kept(List.of(), TestBatches.data(0, 2, A, true), TestBatches.marker(2, A, false),
                TestBatches.data(3, 2, B, true))).containsExactly(0L, 2L, 3L);
    }

    @Test
    void aControlKeyNoBrokerWritesIsACorruptBatch() {
        ReadCommittedFilter filter = new ReadCommittedFilter(List.of(new AbortedTransactions.Aborted(A, 0, 5)));
        assertThatThrownBy(() -> filter.isAborted(parse(TestBatches.control(5, A, new byte[] {0, 0}))))
                .isInstanceOf(CorruptRecordException.class).hasMessageContaining("fewer than 4");
        assertThatThrownBy(() -> filter.isAborted(parse(TestBatches.control(5, A, new byte[] {(byte) 0xff, (byte) 0xff, 0, 0}))))
                .isInstanceOf(CorruptRecordException.class).hasMessageContaining("negative key version");
        assertThatThrownBy(() -> filter.isAborted(parse(TestBatches.control(5, A, null))))
                .isInstanceOf(CorruptRecordException.class).hasMessageContaining("null");
    }
}
