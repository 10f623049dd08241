package io.rdma4j.kafka;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Directory lookups sent ahead, over real tcp transports, to an exporter whose directory handler answers only when
 * the test says so: lookups sent together are in flight together, the one that matches serves the fetch with the
 * watermark its reply carries (or, from an exporter that sends none, the one read after it), and what does not match,
 * is too old or failed is asked again or fails the fetch.
 */
class DirectoryLookupsTest {

    private static final TopicPartition TP0 = new TopicPartition("t", 0);
    private static final TopicPartition TP1 = new TopicPartition("t", 1);
    private static final TopicPartition TP2 = new TopicPartition("t", 2);
    private static final Watermark PUBLISHED = new Watermark(60, 50, 300, 0, 55, 50, 1, 0, Watermark.UNKNOWN_LEADER);

    private RdmaTransport exporter;
    private RdmaTransport consumer;
    private Arena arena;
    private RdmaConnection c;
    private RegisteredRegion watermark;
    private SegmentDirectory.Response directory;
    /** The directory requests the exporter got, by partition, and the replies it has not sent yet. */
    private final Map<Integer, CompletableFuture<ByteBuffer>> unanswered = new ConcurrentHashMap<>();
    private final AtomicInteger requests = new AtomicInteger();
    private ExporterReads reads;
    private long nanos;
    private DirectoryLookups lookups;

    @BeforeEach
    void serve() {
        TransportConfig tcp = TransportConfig.builder().provider("tcp").build();
        exporter = RdmaTransport.open(tcp);
        consumer = RdmaTransport.open(tcp);
        arena = Arena.ofShared();
        watermark = exporter.register(arena.allocate(Watermark.SIZE, 8), Access.remoteRead());
        PUBLISHED.writeTo(watermark.segment());
        RegisteredRegion bytes = exporter.register(arena.allocate(4096, 8), Access.remoteRead());
        directory = new SegmentDirectory.Response(SegmentDirectory.Status.OK, watermark.descriptor(), 0,
                List.of(new SegmentDirectory.Segment(50, 400, false, bytes.descriptor())));
        RdmaListener listener = exporter.listen(new InetSocketAddress("127.0.0.1", 0), RequestHandlers.of(RequestTypes.KAFKA_DIRECTORY,
                (body, context) -> {
                    SegmentDirectory.Request r = SegmentDirectory.Request.fromBytes(body);
                    requests.incrementAndGet();
                    return unanswered.computeIfAbsent(r.partition(), p -> new CompletableFuture<>());
                }));
        c = consumer.connect(listener.localAddress()).join();
        reads = new ExporterReads(consumer, RdmaFetchMetrics.detached(), false, Long.MAX_VALUE);
        lookups = new DirectoryLookups(reads::watermarkAhead, () -> nanos);
    }

    @AfterEach
    void close() throws Exception {
        unanswered.values().forEach(f -> f.complete(ByteBuffer.wrap(directory.toBytes())));
        reads.close();
        c.close();
        consumer.close();
        exporter.close();
        arena.close();
    }

    private static void eventually(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime() - deadline).as("within 10 s: " + what).isNegative();
            Thread.sleep(5);
        }
    }

    private void answer(TopicPartition tp) throws InterruptedException {
        eventually("the exporter got the lookup of " + tp, () -> unanswered.containsKey(tp.partition()));
        unanswered.get(tp.partition()).complete(ByteBuffer.wrap(directory.toBytes()));
    }

    private long readsDone() {
        return consumer.metrics().snapshot(OperationType.READ).count();
    }

    @Test
    void lookupsSentTogetherAreInFlightTogetherAndServeTheFetchWithTheirWatermark() throws InterruptedException {
        lookups.sendAhead(c, TP0, 7);
        lookups.sendAhead(c, TP1, 7);
        lookups.sendAhead(c, TP2, 7);
        lookups.sendAhead(c, TP0, 7); // the same again: held already
        eventually("all three at the exporter, none answered", () -> unanswered.keySet().equals(Set.of(0, 1, 2)));
        assertThat(requests).hasValue(3);

        answer(TP0);
        answer(TP1);
        answer(TP2);
        eventually("each reply followed by its watermark's READ", () -> readsDone() == 3);
        assertThat(lookups.lookUp(c, TP0, 7)).isEqualTo(directory);
        assertThat(lookups.watermarkAhead(c, TP0, watermark.descriptor())).isEqualTo(PUBLISHED);
        assertThat(lookups.lookUp(c, TP1, 7)).isEqualTo(directory);
        assertThat(lookups.watermarkAhead(c, TP1, watermark.descriptor())).isEqualTo(PUBLISHED);
        assertThat(lookups.watermarkAhead(c, TP1, watermark.descriptor())).as("used once").isNull();
        assertThat(requests).as("no lookup asked again").hasValue(3);
        assertThat(lookups.sent.sum()).isEqualTo(3);
        assertThat(readsDone()).isEqualTo(3);
        assertThat(reads.pool().outstandingBuffers()).as("every watermark buffer back").isZero();
    }

    @Test
    void aReplyCarryingTheWatermarkServesTheFetchWithoutAWatermarkRead() throws InterruptedException {
        // Another watermark than the region holds, so what serves can only be the reply's.
        Watermark carried = new Watermark(62, 50, 320, 0, 62, 50, 1, 5, Watermark.UNKNOWN_LEADER);
        directory = new SegmentDirectory.Response(SegmentDirectory.Status.OK, watermark.descriptor(), 0, directory.segments(), carried);
        lookups.sendAhead(c, TP0, 7);
        answer(TP0);
        assertThat(lookups.lookUp(c, TP0, 7)).isEqualTo(directory);
        assertThat(lookups.watermarkAhead(c, TP0, watermark.descriptor())).as("sent ahead").isEqualTo(carried);

        CompletableFuture<SegmentDirectory.Response> now = CompletableFuture.supplyAsync(() -> lookups.lookUp(c, TP1, 7));
        answer(TP1);
        assertThat(now.join()).isEqualTo(directory);
        assertThat(lookups.watermarkAhead(c, TP1, watermark.descriptor())).as("asked now").isEqualTo(carried);

        CompletableFuture<SegmentDirectory.Response> old = CompletableFuture.supplyAsync(() -> lookups.lookUp(c, TP2, 7));
        answer(TP2);
        old.join();
        nanos += SegmentLocator.WATERMARK_REUSE.toNanos();
        assertThat(lookups.watermarkAhead(c, TP2, watermark.descriptor())).as("older than a watermark serves").isNull();
        assertThat(readsDone()).as("no watermark READ").isZero();
        assertThat(requests).hasValue(3);
    }

    @Test
    void aLookupThatDoesNotMatchIsAskedAgainAndAnOldWatermarkIsReadAgain() throws InterruptedException {
        lookups.sendAhead(c, TP0, 7);
        lookups.sendAhead(c, TP1, 7);
        answer(TP0);
        answer(TP1);
        eventually("both watermarks read", () -> readsDone() == 2);

        unanswered.remove(TP0.partition());
        CompletableFuture<SegmentDirectory.Response> other = CompletableFuture.supplyAsync(() -> lookups.lookUp(c, TP0, 9));
        answer(TP0);
        assertThat(other.join()).as("from another offset: asked now").isEqualTo(directory);
        assertThat(requests).hasValue(3);
        assertThat(lookups.watermarkAhead(c, TP0, watermark.descriptor())).as("its watermark not read ahead").isNull();

        lookups.lookUp(c, TP1, 7);
        nanos += SegmentLocator.WATERMARK_REUSE.toNanos();
        assertThat(lookups.watermarkAhead(c, TP1, watermark.descriptor())).as("older than a watermark serves").isNull();

        lookups.sendAhead(c, TP2, 7);
        lookups.retain(Set.of(TP0, TP1));
        answer(TP2);
        unanswered.remove(TP2.partition());
        CompletableFuture<SegmentDirectory.Response> dropped = CompletableFuture.supplyAsync(() -> lookups.lookUp(c, TP2, 7));
        answer(TP2);
        assertThat(dropped.join()).isEqualTo(directory);
        assertThat(requests).as("the lookup of a partition no longer assigned was dropped").hasValue(5);
    }

    /**
     * Lookups sent while the positions wait for the offset reset, for where it is expected to go: a reply serves the
     * fetch from the offset its watermark resolves the request to, and the lookup for a known position sent meanwhile
     * does not replace one still unanswered.
     */
    @Test
    void aLookupSentForAnOffsetResetServesTheFetchFromWhereItResolved() throws InterruptedException {
        Watermark carried = new Watermark(60, 50, 300, 50, 60, 50, 1, 5, Watermark.UNKNOWN_LEADER); // log start 50, HW 60
        directory = new SegmentDirectory.Response(SegmentDirectory.Status.OK, watermark.descriptor(), 0, directory.segments(), carried);
        lookups.sendAhead(c, TP0, SegmentDirectory.Request.EARLIEST);
        lookups.sendAhead(c, TP1, SegmentDirectory.Request.LATEST);
        eventually("both at the exporter", () -> unanswered.keySet().equals(Set.of(0, 1)));
        lookups.sendAhead(c, TP0, 50); // the position known before the reply: the reset's lookup may serve it
        assertThat(requests).hasValue(2);

        answer(TP0);
        answer(TP1);
        assertThat(lookups.lookUp(c, TP0, 50)).isEqualTo(directory);
        assertThat(lookups.watermarkAhead(c, TP0, watermark.descriptor())).isEqualTo(carried);
        assertThat(lookups.lookUp(c, TP1, 60)).isEqualTo(directory);
        assertThat(requests).as("no lookup after the reset").hasValue(2);
        assertThat(lookups.sent.sum()).isEqualTo(2);
        assertThat(readsDone()).as("the watermark came with the replies").isZero();
    }

    /**
     * A reset that went elsewhere than guessed (a committed offset, a log start moved meanwhile), an exporter that
     * does not answer there, or a failed reply: the fetch asks from its position, and fails only if that fails.
     */
    @Test
    void aLookupForAnOffsetResetThatWentElsewhereIsAskedAgain() throws InterruptedException {
        Watermark carried = new Watermark(60, 50, 300, 50, 60, 50, 1, 5, Watermark.UNKNOWN_LEADER);
        directory = new SegmentDirectory.Response(SegmentDirectory.Status.OK, watermark.descriptor(), 0, directory.segments(), carried);
        SegmentDirectory.Response atLogStart = directory;
        // Each lookup asked again is answered from elsewhere in the segment, so that a reply serving the wrong offset shows.
        SegmentDirectory.Response at55 = new SegmentDirectory.Response(SegmentDirectory.Status.OK, watermark.descriptor(), 120,
                directory.segments(), carried);
        lookups.sendAhead(c, TP0, SegmentDirectory.Request.EARLIEST);
        answer(TP0);
        eventually("the exporter answered", () -> unanswered.get(TP0.partition()).isDone());
        unanswered.remove(TP0.partition());
        // Answered at 50: sent again from 55, now or (the reply still on its way) at the fetch.
        lookups.sendAhead(c, TP0, 55);
        CompletableFuture<SegmentDirectory.Response> fetch55 = CompletableFuture.supplyAsync(() -> lookups.lookUp(c, TP0, 55));
        directory = at55;
        answer(TP0);
        assertThat(fetch55.join()).isEqualTo(at55);
        assertThat(requests).hasValue(2);

        directory = atLogStart;
        lookups.sendAhead(c, TP1, SegmentDirectory.Request.EARLIEST);
        answer(TP1);
        unanswered.remove(TP1.partition());
        CompletableFuture<SegmentDirectory.Response> fetch57 = CompletableFuture.supplyAsync(() -> lookups.lookUp(c, TP1, 57));
        directory = at55;
        answer(TP1);
        assertThat(fetch57.join()).as("the position known only at the fetch").isEqualTo(at55);
        assertThat(requests).hasValue(4);
        directory = atLogStart;

        lookups.sendAhead(c, TP2, SegmentDirectory.Request.LATEST);
        eventually("the exporter got the lookup", () -> unanswered.containsKey(TP2.partition()));
        unanswered.remove(TP2.partition()).complete(ByteBuffer.wrap(new SegmentDirectory.Response(
                SegmentDirectory.Status.OFFSET_NOT_EXPORTED, watermark.descriptor(), -1, List.of()).toBytes()));
        CompletableFuture<SegmentDirectory.Response> notThere = CompletableFuture.supplyAsync(() -> lookups.lookUp(c, TP2, 60));
        answer(TP2);
        assertThat(notThere.join()).isEqualTo(directory);
        assertThat(requests).hasValue(6);

        unanswered.clear();
        lookups.sendAhead(c, TP0, SegmentDirectory.Request.EARLIEST);
        eventually("the exporter got the lookup", () -> unanswered.containsKey(TP0.partition()));
        unanswered.remove(TP0.partition()).completeExceptionally(new IllegalStateException("directory broken"));
        CompletableFuture<SegmentDirectory.Response> failed = CompletableFuture.supplyAsync(() -> lookups.lookUp(c, TP0, 50));
        answer(TP0);
        assertThat(failed.join()).as("asked again").isEqualTo(directory);
        assertThat(requests).hasValue(8);

        lookups.sendAhead(c, TP1, SegmentDirectory.Request.EARLIEST);
        lookups.sendAhead(c, TP1, SegmentDirectory.Request.LATEST); // seekToEnd after seekToBeginning: a lookup of its own
        eventually("both at the exporter", () -> requests.get() == 10);
    }

    @Test
    void aLookupThatFailedFailsTheFetchThatUsesItAndReadsNoWatermark() throws InterruptedException {
        lookups.sendAhead(c, TP0, 7);
        eventually("the exporter got the lookup", () -> unanswered.containsKey(TP0.partition()));
        unanswered.get(TP0.partition()).completeExceptionally(new IllegalStateException("directory broken"));
        assertThatThrownBy(() -> lookups.lookUp(c, TP0, 7)).isInstanceOf(RemoteRequestException.class);
        assertThat(lookups.watermarkAhead(c, TP0, watermark.descriptor())).isNull();
        assertThat(readsDone()).as("a failed reply is followed by no READ").isZero();
    }

    @Test
    void aMalformedReplySentAheadFailsTheFetchAsOneAskedNowDoes() throws InterruptedException {
        lookups.sendAhead(c, TP0, 7);
        eventually("the exporter got the lookup", () -> unanswered.containsKey(TP0.partition()));
        unanswered.get(TP0.partition()).complete(ByteBuffer.wrap(new byte[] {(byte) SegmentDirectory.Status.OK.ordinal(), 1}));
        assertThatThrownBy(() -> lookups.lookUp(c, TP0, 7)).isInstanceOf(ProtocolException.class);
        assertThat(lookups.watermarkAhead(c, TP0, watermark.descriptor())).isNull();
        assertThat(readsDone()).as("a malformed reply is followed by no READ").isZero();
        assertThat(requests).as("not asked again").hasValue(1);
    }
}
