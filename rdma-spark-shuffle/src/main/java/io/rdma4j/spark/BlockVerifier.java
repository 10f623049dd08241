package io.rdma4j.spark;

import io.rdma4j.spark.RemoteReadPlanner.Batch;
import io.rdma4j.spark.RemoteReadPlanner.MapRange;
import org.apache.spark.storage.BlockManagerId;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * Checks blocks against the checksums their map task wrote ({@code spark.shuffle.checksum.algorithm}) before Spark
 * reads them. A remote block that does not match may have been corrupted in transfer, so its map range is read once
 * more; one that still does not match, or a local one that does not, fails the fetch, and Spark re-runs the map
 * stage that wrote it. Runs on the task thread.
 */
final class BlockVerifier {

    private final RdmaShuffleConf conf;
    private final FetchFailures failures;

    BlockVerifier(RdmaShuffleConf conf, FetchFailures failures) {
        this.conf = conf;
        this.failures = failures;
    }

    /** Fails the fetch unless {@code bytes}, a block of this executor's own map output, have the checksum expected. */
    void verifyLocal(BlockManagerId where, WantedBlock wanted, ByteBuffer bytes, long expected) {
        if (checksum(bytes) != expected) {
            throw failures.of(where, wanted, "local block " + wanted.blockId() + " is corrupted: its "
                    + conf.checksumAlgorithm() + " checksum does not match the one the map task wrote", null);
        }
    }

    /**
     * Checks block {@code i} of {@code range}, as read into {@code rangeBytes}; when it does not match, reads the range
     * into {@code rangeBytes} once more and fails the fetch unless the block matches then.
     */
    void verifyRemote(Batch batch, MapRange range, MemorySegment rangeBytes, int i) {
        long expected = range.checksums()[i];
        if (expected != MapRange.NO_CHECKSUM && checksum(range.block(rangeBytes, i)) != expected) {
            rereadOnce(batch, range, rangeBytes, i);
        }
    }

    /** A checksum mismatch may be a transfer error: read the range once more, then give up with FetchFailed. */
    private void rereadOnce(Batch batch, MapRange range, MemorySegment rangeBytes, int blockIndex) {
        WantedBlock wanted = new WantedBlock(range.blocks().get(blockIndex), range.mapIndex());
        try {
            // Waits until the read no longer owns rangeBytes, interrupted or not: the buffer goes back to the pool
            // with the batch, and a READ still landing in it would write into another task's blocks.
            batch.connection().readAndWait(range.data(), range.start(), rangeBytes);
        } catch (RuntimeException e) {
            throw failures.of(range.peer(), wanted, "re-reading a corrupted block from executor " + batch.executorId() + " failed: " + e, e);
        }
        if (checksum(range.block(rangeBytes, blockIndex)) != range.checksums()[blockIndex]) {
            throw failures.of(range.peer(), wanted, "block " + wanted.blockId() + " from executor " + batch.executorId()
                    + " is corrupted: its " + conf.checksumAlgorithm() + " checksum does not match the one the map task wrote", null);
        }
    }

    private long checksum(ByteBuffer bytes) {
        return BlockChecksum.of(conf.checksumAlgorithm(), bytes);
    }
}
