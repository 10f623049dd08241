package io.rdma4j.spark;

import io.rdma4j.core.Access;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.spark.RemoteReadPlanner.Batch;
import io.rdma4j.spark.RemoteReadPlanner.MapRange;
import org.apache.spark.FetchFailed;
import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.junit.jupiter.api.Test;
import scala.Option;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Blocks checked against the checksums their map task wrote: a local mismatch fails the fetch at once, a remote one
 * is read once more from the peer and fails the fetch only if it still does not match.
 */
class BlockVerifierTest {

    private static final int SHUFFLE = 4;
    private static final BlockManagerId PEER = BlockManagerId.apply("exec-2", "10.0.0.2", 7337, Option.empty());
    private static final ShuffleBlockId FIRST = new ShuffleBlockId(SHUFFLE, 9, 2);
    private static final ShuffleBlockId SECOND = new ShuffleBlockId(SHUFFLE, 9, 3);
    /** What the peer's data file holds from byte 40: block 2 ("abc") then block 3 ("defgh"). */
    private static final String PEER_RANGE = "abcdefgh";
    private static final long RANGE_START = 40;

    private final RdmaShuffleConf conf = RdmaShuffleConf.from(new SparkConf());
    private final BlockVerifier verifier = new BlockVerifier(conf, new FetchFailures(SHUFFLE));
    private final AnsweredReads peer = new AnsweredReads();

    private long checksum(String block) {
        return BlockChecksum.of(conf.checksumAlgorithm(), ascii(block));
    }

    private MapRange range(long firstChecksum, long secondChecksum) {
        return new MapRange(PEER, 9, 6, new RegionDescriptor("tcp", 0x1000, 4096, 77, Access.remoteRead()), RANGE_START,
                PEER_RANGE.length(), List.of(FIRST, SECOND), new long[] {0, 3}, new long[] {3, 5},
                new long[] {firstChecksum, secondChecksum});
    }

    private Batch batch(MapRange range) {
        return new Batch("exec-2", peer.connection, List.of(range), range.length());
    }

    /** The range as it arrived here, and the peer's file, whose bytes from {@link #RANGE_START} are {@code onPeer}. */
    private MemorySegment arrived(String arrived, String onPeer) {
        peer.peerBytes = ("x".repeat((int) RANGE_START) + onPeer).getBytes(StandardCharsets.US_ASCII);
        return Arena.ofAuto().allocate(arrived.length()).copyFrom(MemorySegment.ofArray(arrived.getBytes(StandardCharsets.US_ASCII)));
    }

    @Test
    void aLocalBlockThatDoesNotMatchFailsTheFetchForItsMapOutput() {
        WantedBlock wanted = new WantedBlock(FIRST, 6);
        verifier.verifyLocal(PEER, wanted, ascii("abc"), checksum("abc"));
        assertThatThrownBy(() -> verifier.verifyLocal(PEER, wanted, ascii("abX"), checksum("abc")))
                .isInstanceOf(FetchFailedException.class)
                .hasMessage("rdma4j shuffle: local block shuffle_4_9_2 is corrupted: its ADLER32 checksum does not match the one"
                        + " the map task wrote")
                .satisfies(e -> {
                    FetchFailed reason = (FetchFailed) ((FetchFailedException) e).toTaskFailedReason();
                    assertThat(List.of(reason.shuffleId(), reason.mapId(), reason.mapIndex(), reason.reduceId()))
                            .containsExactly(SHUFFLE, 9L, 6, 2);
                });
    }

    @Test
    void matchingRemoteBlocksAndBlocksWithoutAChecksumAreNotReadAgain() {
        MapRange range = range(checksum("abc"), MapRange.NO_CHECKSUM);
        MemorySegment bytes = arrived("abcdeXgh", PEER_RANGE);
        verifier.verifyRemote(batch(range), range, bytes, 0);
        verifier.verifyRemote(batch(range), range, bytes, 1);
        assertThat(peer.reads).isEmpty();
    }

    @Test
    void aRemoteBlockCorruptedInTransferIsReadOnceMoreAndThenMatches() {
        MapRange range = range(checksum("abc"), checksum("defgh"));
        MemorySegment bytes = arrived("abcdeXgh", PEER_RANGE);
        verifier.verifyRemote(batch(range), range, bytes, 1);
        assertThat(peer.reads).singleElement().satisfies(read -> {
            assertThat(read.remoteOffset()).as("the whole range again").isEqualTo(RANGE_START);
            assertThat(read.sink().byteSize()).isEqualTo(PEER_RANGE.length());
        });
        assertThat(text(range.block(bytes, 1))).isEqualTo("defgh");
    }

    @Test
    void aRemoteBlockThatStillDoesNotMatchOrCannotBeReadAgainFailsTheFetch() {
        MapRange range = range(checksum("abc"), checksum("defgh"));
        MemorySegment bytes = arrived("abXdefgh", "abXdefgh");
        assertThatThrownBy(() -> verifier.verifyRemote(batch(range), range, bytes, 0)).isInstanceOf(FetchFailedException.class)
                .hasMessage("rdma4j shuffle: block shuffle_4_9_2 from executor exec-2 is corrupted: its ADLER32 checksum does not"
                        + " match the one the map task wrote");
        assertThat(peer.reads).as("read once more, not twice").hasSize(1);

        peer.failure = new IOException("connection reset");
        assertThatThrownBy(() -> verifier.verifyRemote(batch(range), range, bytes, 0)).isInstanceOf(FetchFailedException.class)
                .hasMessageStartingWith("rdma4j shuffle: re-reading a corrupted block from executor exec-2 failed: ")
                .hasMessageContaining("connection reset");
    }

    private static ByteBuffer ascii(String s) {
        return ByteBuffer.wrap(s.getBytes(StandardCharsets.US_ASCII));
    }

    private static String text(ByteBuffer bytes) {
        return StandardCharsets.US_ASCII.decode(bytes.duplicate()).toString();
    }
}
