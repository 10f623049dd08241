package io.rdma4j.it.bench.spark;

import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import scala.jdk.javaapi.CollectionConverters;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Sums, per run of a job, what its tasks report about the shuffle read: the time they waited for blocks, the bytes
 * they read, and their whole run time. Tells how much of a job's time the shuffle's fetching could take at most, so a
 * job-time ratio can be told from noise. A run is named by the {@link #RUN} local property of the jobs it starts
 * (an SQL query starts several). Spark delivers these events on its listener bus, so the totals are complete once
 * the context is stopped.
 */
final class ShuffleReadTimes extends SparkListener {

    static final String RUN = "rdma4j.bench.run";

    /** Over a run's tasks: milliseconds waiting for shuffle blocks, shuffle bytes read, milliseconds of task time. */
    record Totals(long fetchWaitMillis, long readBytes, long taskMillis) {

        static final Totals NONE = new Totals(0, 0, 0);

        Totals plus(Totals o) {
            return new Totals(fetchWaitMillis + o.fetchWaitMillis, readBytes + o.readBytes, taskMillis + o.taskMillis);
        }
    }

    private final Map<Integer, String> runOfStage = new ConcurrentHashMap<>();
    private final Map<String, Totals> totals = new ConcurrentHashMap<>();

    @Override
    public void onJobStart(SparkListenerJobStart job) {
        String run = job.properties() == null ? null : job.properties().getProperty(RUN);
        if (run != null) {
            for (Object stageId : CollectionConverters.asJava(job.stageIds())) {
                runOfStage.put((Integer) stageId, run);
            }
        }
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd task) {
        String run = runOfStage.get(task.stageId());
        TaskMetrics metrics = task.taskMetrics();
        if (run == null || metrics == null) {
            return;
        }
        ShuffleReadMetrics read = metrics.shuffleReadMetrics();
        Totals t = new Totals(read.fetchWaitTime(), read.remoteBytesRead() + read.localBytesRead(), metrics.executorRunTime());
        totals.merge(run, t, Totals::plus);
    }

    Totals of(String run) {
        return totals.getOrDefault(run, Totals.NONE);
    }
}
