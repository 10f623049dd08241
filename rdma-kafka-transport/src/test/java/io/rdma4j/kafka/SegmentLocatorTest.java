package io.rdma4j.kafka;

import io.rdma4j.core.Access;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.LongSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Where a fetch reads, worked out from directory replies and watermark records alone: no transport, no broker. The
 * exporter here is an in-memory directory and watermark that each case sets as a real exporter would publish them.
 */
class SegmentLocatorTest {

    private static final TopicPartition TP = new TopicPartition("t", 0);
    private static final InetSocketAddress ADDRESS = new InetSocketAddress("127.0.0.1", 9999);
    /** An exporter chosen without a leader check (the configured address). */
    private static final ExporterLocator.Target ANY_LEADER = new ExporterLocator.Target(ADDRESS, -1, -1);
    private static final RegionDescriptor WATERMARK = region(Watermark.SIZE);
    /** A complete segment of offsets 0-49 (1000 bytes) and the active one from 50, 400 bytes exported so far. */
    private static final SegmentDirectory.Segment OLD = new SegmentDirectory.Segment(0, 1000, true, region(1000));
    private static final SegmentDirectory.Segment ACTIVE = new SegmentDirectory.Segment(50, 400, false, region(4096));

    /** What the exporter publishes now; the directory lookups it was asked, by the offset they start from. */
    private static final class Published implements SegmentLocator.Exporter {
        SegmentDirectory.Response directory;
        Watermark watermark;
        final List<Long> lookedUp = new ArrayList<>();

        @Override
        public SegmentDirectory.Response directory(TopicPartition tp, long fromOffset) {
            lookedUp.add(fromOffset);
            return directory;
        }

        int watermarksRead;

        @Override
        public Watermark watermark(RegionDescriptor region) {
            assertThat(region).as("the watermark region the directory named").isEqualTo(directory.watermarkRegion());
            watermarksRead++;
            return watermark;
        }
    }

    private final Published exporter = new Published();
    private final List<TopicPartition> forgotten = new ArrayList<>();
    /** The locators' clock: unless a case says otherwise, each fetch comes longer after the last than a watermark serves. */
    private long nanos;
    private boolean clockStill;
    private final LongSupplier clock = () -> clockStill ? nanos : (nanos += SegmentLocator.WATERMARK_REUSE.toNanos() + 1);
    private final SegmentLocator locator = new SegmentLocator(false, forgotten::add, clock);

    private static RegionDescriptor region(long length) {
        return new RegionDescriptor("tcp", 4096, length, 77, Access.remoteRead());
    }

    private static SegmentDirectory.Response directory(long startPosition, SegmentDirectory.Segment... segments) {
        return new SegmentDirectory.Response(SegmentDirectory.Status.OK, WATERMARK, startPosition, List.of(segments));
    }

    /** High watermark 60 at byte 300 of the active segment, last stable offset 55, log start 0. */
    private static Watermark watermark(long generation, long hwPosition, int leaderId) {
        return new Watermark(60, 50, hwPosition, 0, 55, 50, generation, 0, leaderId);
    }

    private SegmentLocator.Where where(long position) {
        return locator.where(TP, ANY_LEADER, position, exporter);
    }

    @Test
    void readsFromTheDirectorysStartThenHopsToTheNextSegmentWithoutAskingAgain() {
        exporter.directory = directory(200, OLD, ACTIVE);
        exporter.watermark = watermark(1, 300, Watermark.UNKNOWN_LEADER);

        assertThat(where(10)).isEqualTo(new SegmentLocator.Bytes(OLD, 200, 1000, 60));
        assertThat(locator.exporterOf(TP)).isEqualTo(ADDRESS);
        locator.advance(TP, 50, 1000); // the old segment read to its end
        assertThat(where(50)).as("the active segment, up to the high watermark's byte")
                .isEqualTo(new SegmentLocator.Bytes(ACTIVE, 0, 300, 60));
        locator.advance(TP, 57, 300);
        assertThat(where(57)).as("every byte below the high watermark read").isEqualTo(new SegmentLocator.NothingNew(60));
        assertThat(exporter.lookedUp).as("one lookup, from the first position").containsExactly(10L);
        assertThat(forgotten).isEmpty();
    }

    @Test
    void aPositionOtherThanTheCursorsANewGenerationOrAGrownSegmentLooksTheDirectoryUpAgain() {
        exporter.directory = directory(200, OLD, ACTIVE);
        exporter.watermark = watermark(1, 300, Watermark.UNKNOWN_LEADER);
        where(10);
        locator.advance(TP, 20, 600);

        assertThat(where(5)).as("a seek").isEqualTo(new SegmentLocator.Bytes(OLD, 200, 1000, 60));
        assertThat(forgotten).as("what was read ahead under the old lookup is stale").containsExactly(TP);
        locator.advance(TP, 20, 600);

        exporter.watermark = watermark(2, 300, Watermark.UNKNOWN_LEADER); // segments replaced (compaction, retention)
        exporter.directory = directory(640, OLD, ACTIVE);
        assertThat(where(20)).isEqualTo(new SegmentLocator.Bytes(OLD, 640, 1000, 60));

        locator.advance(TP, 50, 1000);
        assertThat(where(50)).isEqualTo(new SegmentLocator.Bytes(ACTIVE, 0, 300, 60));
        locator.advance(TP, 55, 250);
        exporter.watermark = watermark(2, 500, Watermark.UNKNOWN_LEADER); // written past what the directory exported
        SegmentDirectory.Segment grown = new SegmentDirectory.Segment(50, 800, false, ACTIVE.region());
        exporter.directory = directory(250, grown);
        assertThat(where(55)).isEqualTo(new SegmentLocator.Bytes(grown, 250, 500, 60));
        assertThat(exporter.lookedUp).containsExactly(10L, 5L, 20L, 55L);
        assertThat(forgotten).hasSize(3);
    }

    /**
     * An exporter that stops refreshing a watermark (stopped, hung while its NIC serves READs, refused registering new
     * log data) leaves it unchanged: what lies below it is still read, and at its end, once it has not changed for
     * {@link SegmentLocator#WATERMARK_STALE} by the consumer's clock, the partition goes to Kafka's fetch rather than
     * waiting for records that would never come by RDMA. A refreshed stamp makes its end "nothing new" again.
     */
    @Test
    void aWatermarkTheExporterStoppedRefreshingSendsThePartitionToKafkasFetchAtItsEnd() {
        clockStill = true;
        exporter.directory = directory(200, OLD, ACTIVE);
        exporter.watermark = new Watermark(60, 50, 300, 0, 55, 50, 1, 1_000, Watermark.UNKNOWN_LEADER);
        assertThat(where(10)).isEqualTo(new SegmentLocator.Bytes(OLD, 200, 1000, 60));
        nanos += SegmentLocator.WATERMARK_STALE.toNanos(); // the stamp unchanged all along
        assertThat(where(10)).as("below the high watermark: still read").isEqualTo(new SegmentLocator.Bytes(OLD, 200, 1000, 60));
        locator.advance(TP, 50, 1000);
        locator.advance(TP, 60, 300);
        assertThat(where(60)).as("at its end, just under the limit").isEqualTo(new SegmentLocator.NothingNew(60));
        nanos += 1_000_000;
        assertThat(where(60)).isInstanceOfSatisfying(SegmentLocator.Unreadable.class, u -> {
            assertThat(u.fallback().kind()).isEqualTo(FallbackReason.EXPORTER_STALLED);
            assertThat(u.fallback().reason()).contains("has not refreshed the watermark of " + TP);
        });
        // Kafka's fetch moved the position on: a hung exporter might never answer a lookup, its watermark READ is enough
        List<Long> lookedUp = List.copyOf(exporter.lookedUp);
        int watermarks = exporter.watermarksRead;
        assertThat(where(70)).isInstanceOfSatisfying(SegmentLocator.Unreadable.class,
                u -> assertThat(u.fallback().kind()).isEqualTo(FallbackReason.EXPORTER_STALLED));
        assertThat(exporter.lookedUp).as("no lookup from a stalled exporter").isEqualTo(lookedUp);
        assertThat(exporter.watermarksRead).isEqualTo(watermarks + 1);

        exporter.watermark = new Watermark(60, 50, 300, 0, 55, 50, 1, 1_050, Watermark.UNKNOWN_LEADER);
        nanos += SegmentLocator.WATERMARK_REUSE.toNanos() + 1;
        assertThat(where(60)).as("refreshed again").isEqualTo(new SegmentLocator.NothingNew(60));
    }

    @Test
    void aRecentWatermarkServesTheNextFetchesUntilTheyReachItsEnd() {
        clockStill = true;
        exporter.directory = directory(200, OLD, ACTIVE);
        exporter.watermark = watermark(1, 300, Watermark.UNKNOWN_LEADER);
        assertThat(where(10)).isEqualTo(new SegmentLocator.Bytes(OLD, 200, 1000, 60));
        locator.advance(TP, 30, 600);

        exporter.watermark = watermark(1, 350, Watermark.UNKNOWN_LEADER); // written and published meanwhile
        assertThat(where(30)).as("bytes below the watermark read moments ago: not asked again")
                .isEqualTo(new SegmentLocator.Bytes(OLD, 600, 1000, 60));
        locator.advance(TP, 50, 1000);
        assertThat(where(50)).as("the next segment, still below it").isEqualTo(new SegmentLocator.Bytes(ACTIVE, 0, 300, 60));
        assertThat(exporter.watermarksRead).isEqualTo(1);

        locator.advance(TP, 57, 300);
        assertThat(where(57)).as("its end reached: read afresh, and the bytes written since found")
                .isEqualTo(new SegmentLocator.Bytes(ACTIVE, 300, 350, 60));
        assertThat(exporter.watermarksRead).isEqualTo(2);

        locator.advance(TP, 58, 320);
        nanos += SegmentLocator.WATERMARK_REUSE.toNanos();
        exporter.watermark = watermark(1, 380, Watermark.UNKNOWN_LEADER);
        assertThat(where(58)).as("too old to serve: read afresh").isEqualTo(new SegmentLocator.Bytes(ACTIVE, 320, 380, 60));
        assertThat(exporter.watermarksRead).isEqualTo(3);
        assertThat(where(5)).as("a seek looks up and reads afresh").isEqualTo(new SegmentLocator.Bytes(OLD, 200, 1000, 60));
        assertThat(exporter.watermarksRead).isEqualTo(4);
        assertThat(exporter.lookedUp).containsExactly(10L, 5L);
    }

    @Test
    void readCommittedEndsAtTheLastStableOffset() {
        SegmentLocator committed = new SegmentLocator(true, forgotten::add, clock);
        exporter.directory = directory(0, ACTIVE);
        exporter.watermark = watermark(1, 300, Watermark.UNKNOWN_LEADER);
        assertThat(committed.where(TP, ANY_LEADER, 50, exporter)).isEqualTo(new SegmentLocator.Bytes(ACTIVE, 0, 300, 55));
        committed.advance(TP, 55, 250);
        assertThat(committed.where(TP, ANY_LEADER, 55, exporter)).isEqualTo(new SegmentLocator.NothingNew(55));
    }

    @Test
    void whatTheExporterCannotServeIsNamed() {
        exporter.directory = directory(0, ACTIVE);
        exporter.watermark = new Watermark(60, 50, 300, 20, 60, 50, 1, 0, Watermark.UNKNOWN_LEADER);
        assertThat(where(10)).isInstanceOfSatisfying(SegmentLocator.Unreadable.class,
                u -> assertThat(u.fallback().kind()).isEqualTo(FallbackReason.BELOW_LOG_START));

        exporter.watermark = watermark(1, 300, 2);
        assertThat(locator.where(TP, new ExporterLocator.Target(ADDRESS, 1, 1), 50, exporter))
                .as("chosen as node 1's exporter, which names node 2 the leader").isEqualTo(new SegmentLocator.LeaderElsewhere(2));
        assertThat(locator.where(TP, ANY_LEADER, 50, exporter)).as("chosen without a leader")
                .isEqualTo(new SegmentLocator.Bytes(ACTIVE, 0, 300, 60));

        exporter.directory = new SegmentDirectory.Response(SegmentDirectory.Status.UNKNOWN_PARTITION, null, -1, List.of());
        assertThat(where(7)).isEqualTo(new SegmentLocator.NotExported());
        assertThat(locator.exporterOf(TP)).as("forgotten").isNull();

        exporter.directory = new SegmentDirectory.Response(SegmentDirectory.Status.NOT_AUTHORIZED, null, -1, List.of());
        assertThatThrownBy(() -> where(7)).isInstanceOf(TopicAuthorizationException.class)
                .hasMessageContaining("only to consumers that may READ it");
    }

    @Test
    void aDirectoryThatKeepsDisagreeingWithTheWatermarkEndsAfterAFewHops() {
        // an older segment, incomplete, whose exported bytes end where the fetch starts: every lookup says the same
        SegmentDirectory.Segment stuck = new SegmentDirectory.Segment(0, 400, false, region(400));
        exporter.directory = directory(400, stuck);
        exporter.watermark = watermark(1, 300, Watermark.UNKNOWN_LEADER);
        assertThat(where(10)).isInstanceOfSatisfying(SegmentLocator.Unreadable.class,
                u -> assertThat(u.fallback().kind()).isEqualTo(FallbackReason.DIRECTORY_CHANGING));
        assertThat(exporter.lookedUp).hasSize(1 + SegmentLocator.MAX_HOPS);
    }

    @Test
    void partitionsNoLongerAssignedOrAtAGoneExporterAreForgotten() {
        exporter.directory = directory(0, ACTIVE);
        exporter.watermark = watermark(1, 300, Watermark.UNKNOWN_LEADER);
        TopicPartition other = new TopicPartition("t", 1);
        where(50);
        locator.where(other, ANY_LEADER, 50, exporter);

        locator.retain(Set.of(TP));
        assertThat(locator.exporterOf(other)).isNull();
        assertThat(forgotten).containsExactly(other);
        locator.forgetAt(new InetSocketAddress("127.0.0.1", 1));
        assertThat(locator.exporterOf(TP)).as("another exporter gone").isEqualTo(ADDRESS);
        locator.forgetAt(ADDRESS);
        assertThat(locator.exporterOf(TP)).isNull();
        assertThat(forgotten).containsExactly(other, TP);
    }
}
