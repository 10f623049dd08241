package io.rdma4j.kafka;

import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.kafka.protocol.TestBatches;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** A range of batch bytes in a registered buffer of a real (tcp) pool: who owns the buffer, and when it goes back. */
class BatchRangeTest {

    private static final ByteBuffer FIRST = TestBatches.data(0, 3, TestBatches.NO_PRODUCER, false);
    private static final ByteBuffer SECOND = TestBatches.data(3, 2, TestBatches.NO_PRODUCER, false);
    private static final ByteBuffer BOTH = TestBatches.concat(FIRST, SECOND);
    private static final long SEGMENT = 7;
    private static final long AT = 100;

    private RdmaTransport transport;
    private RegisteredBufferPool pool;

    @BeforeEach
    void open() {
        transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        pool = transport.createBufferPool(PoolConfig.defaults());
    }

    @AfterEach
    void close() {
        pool.close();
        transport.close();
    }

    private PooledBuffer filled() {
        PooledBuffer buffer = pool.acquire(BOTH.remaining());
        buffer.segment().asByteBuffer().put(BOTH.duplicate());
        return buffer;
    }

    @Test
    void aRangeBeingReadGivesItsBufferBackOnlyOnceTheReadAndDecodingFinish() {
        CompletableFuture<DecodedBatches> done = new CompletableFuture<>();
        long[] readDone = new long[1];
        BatchRange range = BatchRange.pending(SEGMENT, AT, filled(), done, 1_000, readDone);
        range.release();
        assertThat(pool.outstandingBuffers()).as("still written by the READ").isEqualTo(1);
        readDone[0] = 1_500;
        done.complete(null);
        assertThat(pool.outstandingBuffers()).isZero();
    }

    @Test
    void batchesDecodedAheadAreServedAsTheyAreAndTheRestOfARangeKeepsItsBuffer() {
        PooledBuffer buffer = filled();
        DecodedBatches ahead = DecodedBatches.decode(buffer.segment(), org.apache.kafka.common.utils.BufferSupplier.create());
        long[] readDone = {1_500};
        BatchRange range = BatchRange.pending(SEGMENT, AT, buffer, CompletableFuture.completedFuture(ahead), 1_000, readDone);

        assertThat(range.await()).isSameAs(ahead).isSameAs(range.await());
        assertThat(range.readNanos()).isEqualTo(500);
        assertThat(range.end()).isEqualTo(AT + BOTH.remaining());
        assertThat(range.serves(SEGMENT, AT, range.end())).isTrue();
        assertThat(range.serves(SEGMENT, AT, range.end() - 1)).as("ends past what may be read").isFalse();
        assertThat(range.serves(SEGMENT, AT + 1, range.end())).isFalse();
        assertThat(range.serves(SEGMENT + 1, AT, range.end())).isFalse();

        assertThat(range.rest(AT + 5, ahead)).as("no batch starts there").isNull();
        assertThat(range.rest(range.end(), ahead)).as("nothing left").isNull();
        BatchRange rest = range.rest(AT + FIRST.remaining(), ahead);
        assertThat(rest.serves(SEGMENT, AT + FIRST.remaining(), range.end())).isTrue();
        assertThat(rest.bytes().byteSize()).isEqualTo(SECOND.remaining());
        assertThat(rest.readNanos()).as("not read again").isZero();
        assertThat(rest.await().batches()).singleElement().satisfies(b -> assertThat(b.baseOffset()).isEqualTo(3));
        rest.release();
        assertThat(pool.outstandingBuffers()).as("the rest owned the buffer").isZero();
    }

    @Test
    void bytesAlreadyInTheBufferAreParsedOnceWhenAsked() {
        BatchRange range = BatchRange.inBuffer(SEGMENT, AT, filled());
        DecodedBatches decoded = range.await();
        assertThat(decoded.batches()).hasSize(2);
        assertThat(range.await()).isSameAs(decoded);
        assertThat(range.readNanos()).isZero();
        range.release();
        assertThat(pool.outstandingBuffers()).isZero();
    }

    @Test
    void aFailedReadThrowsWhatReadAndWaitWouldAndGivesItsBufferBack() {
        RdmaException refused = new RdmaException("remote access error");
        BatchRange failed = BatchRange.pending(SEGMENT, AT, filled(), CompletableFuture.failedFuture(refused), 1_000, new long[1]);
        assertThatThrownBy(failed::await).isSameAs(refused);
        assertThat(pool.outstandingBuffers()).isZero();

        BatchRange broken = BatchRange.pending(SEGMENT, AT, filled(),
                CompletableFuture.failedFuture(new IllegalStateException("decoder gone")), 1_000, new long[1]);
        assertThatThrownBy(broken::await).isInstanceOf(RdmaException.class)
                .hasMessageContaining("read-ahead of segment 7 at byte 100 failed").hasMessageContaining("decoder gone");
        broken.release();
        assertThat(pool.outstandingBuffers()).isZero();
    }
}
