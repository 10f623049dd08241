package io.rdma4j.kafka;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.TestBatches;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The READs of a consumer, against a segment of three batches in an exporter's registered memory, over real tcp
 * transports: what is read now, what is kept or read ahead within {@code fetch.max.bytes}, and every buffer back.
 */
class ExporterReadsTest {

    private static final TopicPartition TP = new TopicPartition("t", 0);
    private static final ByteBuffer FIRST = TestBatches.data(0, 3, TestBatches.NO_PRODUCER, false);
    private static final ByteBuffer SECOND = TestBatches.data(3, 2, TestBatches.NO_PRODUCER, false);
    private static final ByteBuffer THIRD = TestBatches.data(5, 4, TestBatches.NO_PRODUCER, false);
    private static final ByteBuffer LOG = TestBatches.concat(FIRST, SECOND, THIRD);
    private static final long LEN = LOG.remaining();
    private static final long F = FIRST.remaining();

    private RdmaTransport exporter;
    private RdmaTransport consumer;
    private Arena arena;
    private RdmaConnection c;
    private SegmentDirectory.Segment segment;
    private RegisteredRegion watermark;

    @BeforeEach
    void serve() {
        TransportConfig tcp = TransportConfig.builder().provider("tcp").build();
        exporter = RdmaTransport.open(tcp);
        consumer = RdmaTransport.open(tcp);
        arena = Arena.ofShared();
        MemorySegment memory = arena.allocate(LEN, 8);
        memory.asByteBuffer().put(LOG.duplicate());
        segment = new SegmentDirectory.Segment(0, LEN, false, exporter.register(memory, Access.remoteRead()).descriptor());
        watermark = exporter.register(arena.allocate(Watermark.SIZE, 8), Access.remoteRead());
        RdmaListener listener = exporter.listen(new InetSocketAddress("127.0.0.1", 0), RequestHandlers.none());
        c = consumer.connect(listener.localAddress()).join();
    }

    @AfterEach
    void close() throws Exception {
        c.close();
        consumer.close();
        exporter.close();
        arena.close();
    }

    private long readsDone() {
        return consumer.metrics().snapshot(OperationType.READ).count();
    }

    @Test
    void whatAFetchLeftIsKeptAndServedWithoutAnotherRead() {
        try (ExporterReads reads = new ExporterReads(consumer, RdmaFetchMetrics.detached(), true, Long.MAX_VALUE)) {
            BatchRange all = reads.load(TP, c, segment, 0, LEN, LEN);
            assertThat(all.await().batches()).hasSize(3);
            assertThat(readsDone()).isEqualTo(1);

            assertThat(reads.keepAhead(TP, c, segment, all, F, LEN, LEN)).as("kept: a fetch stopped after the first batch").isTrue();
            assertThat(reads.bytesAhead()).isEqualTo(LEN - F);
            BatchRange rest = reads.load(TP, c, segment, F, LEN, LEN);
            assertThat(rest.await().batches()).extracting(b -> b.baseOffset()).containsExactly(3L, 5L);
            assertThat(readsDone()).as("served from what was kept").isEqualTo(1);
            assertThat(reads.bytesAhead()).as("handed to the fetch").isZero();
            rest.release();
            assertThat(reads.pool().outstandingBuffers()).isZero();
        }
    }

    @Test
    void aRangeUsedToItsEndReadsTheNextBytesAheadWithinFetchMaxBytes() {
        try (ExporterReads reads = new ExporterReads(consumer, RdmaFetchMetrics.detached(), true, Long.MAX_VALUE)) {
            BatchRange first = reads.load(TP, c, segment, 0, LEN, F);
            assertThat(first.bytes().byteSize()).isEqualTo(F);
            assertThat(reads.keepAhead(TP, c, segment, first, F, LEN, LEN)).isFalse();
            first.release();
            assertThat(reads.bytesAhead()).as("read ahead").isEqualTo(LEN - F);
            BatchRange ahead = reads.load(TP, c, segment, F, LEN, LEN);
            assertThat(ahead.await().batches()).extracting(b -> b.baseOffset()).containsExactly(3L, 5L);
            assertThat(ahead.readNanos()).isPositive();
            assertThat(readsDone()).isEqualTo(2);
            ahead.release();
            // a seek elsewhere: what was read ahead is given back, not served
            BatchRange again = reads.load(TP, c, segment, 0, LEN, F);
            assertThat(reads.keepAhead(TP, c, segment, again, F, LEN, LEN)).isFalse();
            again.release();
            BatchRange elsewhere = reads.load(TP, c, segment, 0, LEN, LEN);
            assertThat(elsewhere.await().batches()).hasSize(3);
            assertThat(reads.bytesAhead()).isZero();
            elsewhere.release();
        }
        try (ExporterReads bounded = new ExporterReads(consumer, RdmaFetchMetrics.detached(), false, LEN - F - 1)) {
            BatchRange all = bounded.load(TP, c, segment, 0, LEN, LEN);
            assertThat(bounded.keepAhead(TP, c, segment, all, F, LEN, LEN)).as("the rest exceeds fetch.max.bytes").isFalse();
            all.release();
            BatchRange first = bounded.load(TP, c, segment, 0, LEN, F);
            assertThat(bounded.keepAhead(TP, c, segment, first, F, LEN, LEN)).isFalse();
            first.release();
            assertThat(bounded.bytesAhead()).as("nothing read ahead past fetch.max.bytes").isZero();
            assertThat(bounded.pool().outstandingBuffers()).isZero();
        }
    }

    @Test
    void aBatchLargerThanTheFetchSizeIsReadWholeAndOneEndingPastTheWatermarkIsCorrupt() {
        try (ExporterReads reads = new ExporterReads(consumer, RdmaFetchMetrics.detached(), true, Long.MAX_VALUE)) {
            BatchRange whole = reads.load(TP, c, segment, 0, LEN, 20);
            assertThat(whole.bytes().byteSize()).isEqualTo(F);
            assertThat(whole.await().batches()).singleElement().satisfies(b -> assertThat(b.lastOffset()).isEqualTo(2));
            whole.release();
            assertThatThrownBy(() -> reads.load(TP, c, segment, 0, F - 1, 20)).isInstanceOf(CorruptRecordException.class)
                    .hasMessageContaining("past the high watermark position " + (F - 1));
            assertThat(reads.pool().outstandingBuffers()).isZero();
        }
    }

    @Test
    void aWatermarkIsReadUntilConsistent() {
        Watermark published = new Watermark(9, 0, LEN, 0, 9, 0, 3, 0, 1);
        published.writeTo(watermark.segment());
        try (ExporterReads reads = new ExporterReads(consumer, RdmaFetchMetrics.detached(), true, Long.MAX_VALUE)) {
            assertThat(reads.watermark(c, watermark.descriptor())).isEqualTo(published);
            watermark.segment().set(java.lang.foreign.ValueLayout.JAVA_BYTE, 20, (byte) 0x55); // never the CRC's
            assertThatThrownBy(() -> reads.watermark(c, watermark.descriptor())).isInstanceOf(RdmaException.class)
                    .hasMessageContaining("never read consistently");
            assertThat(reads.pool().outstandingBuffers()).isZero();
        }
    }
}
