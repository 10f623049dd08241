package io.rdma4j.spark;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredMemoryLimitException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.spark.InFlightReads.Completed;
import io.rdma4j.spark.InFlightReads.Planned;
import io.rdma4j.spark.InFlightReads.Unbuffered;
import io.rdma4j.spark.RemoteReadPlanner.Batch;
import io.rdma4j.spark.RemoteReadPlanner.MapRange;
import io.rdma4j.spark.RemoteReadPlanner.PlanFailure;
import org.apache.spark.SparkConf;
import org.apache.spark.storage.ShuffleBlockId;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.List;
import java.util.stream.LongStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A reduce task's remote reads against a peer whose READs the test completes: at most the bound requested and not
 * taken, one batch whatever its size when nothing is in flight, and every pooled buffer back once the task ends.
 */
class InFlightReadsTest {

    private static final long MAX_IN_FLIGHT = 100;

    private RdmaTransport transport;
    private RegisteredBufferPool pool;
    private final AnsweredReads peer = new AnsweredReads();
    private long nextMap;

    @BeforeEach
    void open() {
        transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        pool = transport.createBufferPool(RdmaShuffleConf.from(new SparkConf()).poolConfig());
    }

    @AfterEach
    void close() {
        transport.close();
    }

    /** A batch of one map range per length, each range holding one block. */
    private Batch batch(long... lengths) {
        List<MapRange> ranges = LongStream.of(lengths).mapToObj(length -> {
            long map = nextMap++;
            return new MapRange(null, map, (int) map, new RegionDescriptor("tcp", 0x1000, 1 << 20, 5, Access.remoteRead()), 0,
                    length, List.of(new ShuffleBlockId(0, map, 0)), new long[] {0}, new long[] {length},
                    new long[] {MapRange.NO_CHECKSUM});
        }).toList();
        return new Batch("exec-2", peer.connection, ranges, LongStream.of(lengths).sum());
    }

    /** Takes the next arrival as the task thread does, letting go of a finished read's share of its buffer. */
    private static InFlightReads.Arrival take(InFlightReads reads) {
        InFlightReads.Arrival arrival = reads.take();
        if (arrival instanceof Completed read) {
            reads.readTaken(read);
            read.shared().readFinished();
        } else if (arrival instanceof Unbuffered) {
            reads.unbufferedTaken();
        } else {
            reads.planningTaken();
        }
        return arrival;
    }

    @Test
    void batchesWaitUntilTheBytesInFlightAllowThemAndABigOneGoesAlone() {
        InFlightReads reads = new InFlightReads(pool, MAX_IN_FLIGHT);
        reads.expectPlannings(1);
        reads.add(List.of(batch(60), batch(30, 30), batch(30)));
        assertThat(peer.reads).as("60 + 60 would pass the bound of 100").hasSize(1);

        peer.reads.getFirst().done().complete(null);
        assertThat(take(reads)).isInstanceOf(Completed.class);
        assertThat(peer.reads).as("the next two batches fit in 100 together").hasSize(4);
        assertThat(peer.reads.subList(1, 4)).extracting(read -> read.sink().byteSize()).containsExactly(30L, 30L, 30L);
        assertThat(reads.drained()).isFalse();

        peer.reads.subList(1, 4).forEach(read -> read.done().complete(null));
        for (int i = 0; i < 3; i++) {
            assertThat(take(reads)).isInstanceOf(Completed.class);
        }
        reads.add(List.of(batch(250), batch(10)));
        assertThat(peer.reads).as("nothing in flight: a batch over the bound goes, alone").hasSize(5);
        peer.reads.get(4).done().complete(null);
        take(reads);
        assertThat(peer.reads).hasSize(6);
        peer.reads.get(5).done().complete(null);
        take(reads);

        assertThat(reads.drained()).as("a planning is still to arrive").isFalse();
        reads.planned(null);
        assertThat(take(reads)).isInstanceOf(Planned.class);
        assertThat(reads.drained()).isTrue();
        reads.close();
        assertThat(pool.outstandingBuffers()).as("every buffer back in the pool").isZero();
    }

    @Test
    void aFailedReadAndAFailedPlanningArriveForTheTaskThread() {
        InFlightReads reads = new InFlightReads(pool, MAX_IN_FLIGHT);
        reads.expectPlannings(1);
        PlanFailure failure = new PlanFailure(null, null, "cannot describe map outputs", null);
        reads.planned(failure);
        assertThat(take(reads)).isEqualTo(new Planned(failure));

        peer.failure = new IOException("connection reset");
        reads.add(List.of(batch(10)));
        assertThat(take(reads)).isInstanceOfSatisfying(Completed.class,
                read -> assertThat(read.failure()).hasMessage("connection reset"));
        reads.close();
        assertThat(pool.outstandingBuffers()).isZero();
    }

    /**
     * Past the executor's registered-memory limit (here {@code tcp.max-registered-bytes}) a batch gets no buffer: none
     * of its reads is issued, it arrives for the task thread (which has Spark fetch its blocks), and the reads are not
     * drained before it is taken.
     */
    @Test
    void aBatchNoBufferCanBeRegisteredForArrivesWithoutAnyOfItsReads() {
        try (RdmaTransport limited = RdmaTransport.open(TransportConfig.builder().provider("tcp")
                .providerOption("tcp.max-registered-bytes", "1k").build())) {
            InFlightReads reads = new InFlightReads(limited.createBufferPool(RdmaShuffleConf.from(new SparkConf()).poolConfig()),
                    MAX_IN_FLIGHT);
            reads.expectPlannings(0);
            Batch batch = batch(30, 40);
            reads.add(List.of(batch));
            assertThat(peer.reads).as("nothing read without a buffer").isEmpty();
            assertThat(reads.drained()).as("the batch is still to be taken").isFalse();
            assertThat(take(reads)).isInstanceOfSatisfying(Unbuffered.class, u -> {
                assertThat(u.batch()).isSameAs(batch);
                assertThat(u.cause()).isInstanceOf(RegisteredMemoryLimitException.class)
                        .hasMessageContaining("tcp.max-registered-bytes=1024");
            });
            assertThat(reads.drained()).isTrue();
            reads.close();
        }
    }

    /**
     * A batch refused a buffer while another read is in flight waits for that read (whose buffer may make room) rather
     * than going to Spark at once: only with nothing in flight does a refusal send it there.
     */
    @Test
    void aBatchRefusedABufferWaitsForTheReadsInFlight() {
        try (RdmaTransport limited = RdmaTransport.open(TransportConfig.builder().provider("tcp")
                .providerOption("tcp.max-registered-bytes", "12k").build())) {
            // batches over the 4 KiB slab get a registration of their own: 6 KiB fits the limit, 6 + 8 KiB do not
            InFlightReads reads = new InFlightReads(limited.createBufferPool(RdmaShuffleConf.from(new SparkConf()
                    .set("spark.shuffle.rdma.bufferSlabSize", "4k")).poolConfig()), 1 << 20);
            reads.expectPlannings(0);
            Batch second = batch(8 << 10);
            reads.add(List.of(batch(6 << 10), second));
            assertThat(peer.reads).as("the first batch is read").hasSize(1);
            assertThat(reads.drained()).isFalse();

            peer.reads.getFirst().done().complete(null);
            assertThat(take(reads)).as("nothing went to Spark while a read was in flight").isInstanceOf(Completed.class);
            // taken, the first read's buffer is back: the second batch is read, or refused again and Spark's
            if (peer.reads.size() == 2) {
                peer.reads.get(1).done().complete(null);
                assertThat(take(reads)).isInstanceOf(Completed.class);
            } else {
                assertThat(take(reads)).isInstanceOfSatisfying(Unbuffered.class, u -> assertThat(u.batch()).isSameAs(second));
            }
            assertThat(reads.drained()).isTrue();
            reads.close();
        }
    }

    @Test
    void whenTheTaskEndsReadsStillInFlightOrNotTakenGiveTheirBufferBack() {
        InFlightReads reads = new InFlightReads(pool, MAX_IN_FLIGHT);
        reads.expectPlannings(1);
        reads.add(List.of(batch(20, 20), batch(90)));
        assertThat(peer.reads).hasSize(2);
        peer.reads.getFirst().done().complete(null); // finished, never taken

        reads.close();
        assertThat(pool.outstandingBuffers()).as("one read of the batch is still in flight").isEqualTo(1);
        peer.reads.get(1).done().complete(null);
        assertThat(pool.outstandingBuffers()).isZero();

        reads.add(List.of(batch(10)));
        assertThat(peer.reads).as("nothing is issued once the task ended").hasSize(2);
    }
}
