package io.rdma4j.spark;

import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Spark's shuffle read metrics (what its UI shows) summed over finished tasks, plus the executors that wrote
 * map outputs: how the Spark tests see that blocks really crossed executors. Shipped in this module's
 * test-jar with {@link LocalCluster}.
 */
public final class ShuffleReadTotals extends SparkListener {

    private final AtomicLong remoteBlocks = new AtomicLong();
    private final AtomicLong remoteBytes = new AtomicLong();
    private final AtomicLong localBlocks = new AtomicLong();
    private final Set<String> mapExecutors = ConcurrentHashMap.newKeySet();

    private ShuffleReadTotals() {
    }

    public static ShuffleReadTotals attach(JavaSparkContext sc) {
        ShuffleReadTotals totals = new ShuffleReadTotals();
        sc.sc().addSparkListener(totals);
        return totals;
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
        if (end.taskMetrics() == null) {
            return;
        }
        ShuffleReadMetrics read = end.taskMetrics().shuffleReadMetrics();
        remoteBlocks.addAndGet(read.remoteBlocksFetched());
        remoteBytes.addAndGet(read.remoteBytesRead());
        localBlocks.addAndGet(read.localBlocksFetched());
        if (end.taskMetrics().shuffleWriteMetrics().bytesWritten() > 0) {
            mapExecutors.add(end.taskInfo().executorId());
        }
    }

    public long remoteBlocks() {
        return remoteBlocks.get();
    }

    public long remoteBytes() {
        return remoteBytes.get();
    }

    public long localBlocks() {
        return localBlocks.get();
    }

    /** Executors whose tasks wrote shuffle data. */
    public Set<String> mapExecutors() {
        return Set.copyOf(mapExecutors);
    }

    /** Starts counting afresh (task-end events of earlier jobs that arrive later still count). */
    public void reset() {
        remoteBlocks.set(0);
        remoteBytes.set(0);
        localBlocks.set(0);
        mapExecutors.clear();
    }
}
