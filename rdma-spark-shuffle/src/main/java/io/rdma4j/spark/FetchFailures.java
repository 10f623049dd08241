package io.rdma4j.spark;

import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;

/**
 * Spark's {@link FetchFailedException} for a block of one shuffle: the scheduler then re-runs the map stage that wrote
 * it. Made on the task thread only, since Spark ties the exception to the TaskContext of the thread that constructs it.
 */
final class FetchFailures {

    private final int shuffleId;

    FetchFailures(int shuffleId) {
        this.shuffleId = shuffleId;
    }

    /**
     * Throws the failure of {@code wanted} from {@code where}, undeclared as Spark's Scala code throws it; the return
     * type lets callers write {@code throw failures.of(...)}.
     */
    RuntimeException of(BlockManagerId where, WantedBlock wanted, String message, Throwable cause) {
        ShuffleBlockId id = wanted.blockId();
        return sneaky(new FetchFailedException(where, shuffleId, id.mapId(), wanted.mapIndex(), id.reduceId(),
                "rdma4j shuffle: " + message, cause));
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable t) throws E {
        throw (E) t;
    }
}
