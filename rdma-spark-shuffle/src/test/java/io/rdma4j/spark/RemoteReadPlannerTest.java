package io.rdma4j.spark;

import io.rdma4j.core.Access;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.spark.RemoteReadPlanner.Batch;
import io.rdma4j.spark.RemoteReadPlanner.MapRange;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.junit.jupiter.api.Test;
import scala.Option;

import java.util.List;
import java.util.stream.LongStream;

import static org.assertj.core.api.Assertions.assertThat;

/** Which bytes of a peer's map outputs a reduce task reads, from their index entries, and how they are batched. */
class RemoteReadPlannerTest {

    private static final BlockManagerId PEER = BlockManagerId.apply("exec-2", "10.0.0.2", 7337, Option.empty());
    private static final RegionDescriptor DATA = new RegionDescriptor("tcp", 0x1000, 4096, 5, Access.remoteRead());

    private static WantedBlock wanted(long map, int reduce) {
        return new WantedBlock(new ShuffleBlockId(1, map, reduce), (int) map + 100);
    }

    @Test
    void aMapOutputsWantedBlocksAreOneRangeFromTheFirstToTheLastWithoutTheEmptyOnes() {
        // Partitions 2 to 5 span bytes 100 to 175: 2 is 10 bytes, 3 is empty, 4 (not wanted) 40, 5 is 25.
        long[] entries = {100, 110, 110, 150, 175};
        long[] checksums = {1002, 1003, 1004, 1005};
        MapRange range = RemoteReadPlanner.mapRange(PEER, List.of(wanted(7, 5), wanted(7, 2), wanted(7, 3)), DATA, 2,
                entries, checksums);

        assertThat(range.peer()).isEqualTo(PEER);
        assertThat(range.mapId()).isEqualTo(7);
        assertThat(range.mapIndex()).isEqualTo(107);
        assertThat(range.data()).isEqualTo(DATA);
        assertThat(range.start()).isEqualTo(100);
        assertThat(range.length()).as("a partition between wanted ones is read along").isEqualTo(75);
        assertThat(range.blocks()).extracting(ShuffleBlockId::reduceId).as("in the order asked, the empty one left out")
                .containsExactly(5, 2);
        assertThat(range.blockOffsets()).containsExactly(50, 0);
        assertThat(range.blockLengths()).containsExactly(25, 10);
        assertThat(range.checksums()).containsExactly(1005, 1002);

        MapRange unchecked = RemoteReadPlanner.mapRange(PEER, List.of(wanted(7, 2)), DATA, 2, new long[] {100, 110}, null);
        assertThat(unchecked.checksums()).containsExactly(MapRange.NO_CHECKSUM);
        assertThat(RemoteReadPlanner.mapRange(PEER, List.of(wanted(7, 3)), DATA, 3, new long[] {110, 110}, null))
                .as("nothing to read").isNull();
    }

    @Test
    void aMapOutputLargerThanTheTargetIsSplitIntoRangesOfAtMostTheTargetButABigBlockIsOneRange() {
        // Partitions 0 to 4 from byte 100: 40, 40, 0, 40 and 150 bytes.
        long[] entries = {100, 140, 180, 180, 220, 370};
        List<WantedBlock> all = List.of(wanted(7, 4), wanted(7, 0), wanted(7, 1), wanted(7, 2), wanted(7, 3));

        List<MapRange> ranges = RemoteReadPlanner.mapRanges(PEER, all, DATA, 0, entries, null, 100);

        assertThat(ranges).extracting(MapRange::start).containsExactly(100L, 180L, 220L);
        assertThat(ranges).extracting(MapRange::length).containsExactly(80L, 40L, 150L);
        assertThat(ranges).extracting(r -> r.blocks().stream().map(ShuffleBlockId::reduceId).toList())
                .as("every non-empty block once, in file order").containsExactly(List.of(0, 1), List.of(3), List.of(4));
        assertThat(ranges.getFirst().blockOffsets()).containsExactly(0, 40);
        assertThat(ranges).allSatisfy(r -> assertThat(r.mapIndex()).isEqualTo(107));

        assertThat(RemoteReadPlanner.mapRanges(PEER, all, DATA, 0, entries, null, 270))
                .as("within the target: the one range of mapRange").singleElement()
                .satisfies(r -> assertThat(r.blocks()).extracting(ShuffleBlockId::reduceId).containsExactly(4, 0, 1, 3));
    }

    @Test
    void rangesAreBatchedInOrderUpToTheTargetAndABigRangeIsABatchOfItsOwn() {
        AnsweredReads peer = new AnsweredReads();
        List<MapRange> ranges = LongStream.of(40, 50, 30, 120, 10).mapToObj(length -> new MapRange(PEER, length, 0, DATA, 0,
                length, List.of(new ShuffleBlockId(1, length, 0)), new long[] {0}, new long[] {length},
                new long[] {MapRange.NO_CHECKSUM})).toList();

        List<Batch> batches = RemoteReadPlanner.batches("exec-2", peer.connection, ranges, 100);

        assertThat(batches).extracting(Batch::bytes).containsExactly(90L, 30L, 120L, 10L);
        assertThat(batches).extracting(b -> b.ranges().stream().map(MapRange::length).toList())
                .containsExactly(List.of(40L, 50L), List.of(30L), List.of(120L), List.of(10L));
        assertThat(batches).allSatisfy(b -> {
            assertThat(b.executorId()).isEqualTo("exec-2");
            assertThat(b.connection()).isSameAs(peer.connection);
        });
        assertThat(RemoteReadPlanner.batches("exec-2", peer.connection, List.of(), 100)).isEmpty();
    }
}
