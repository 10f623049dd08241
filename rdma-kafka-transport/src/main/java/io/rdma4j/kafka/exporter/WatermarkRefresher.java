package io.rdma4j.kafka.exporter;

import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Keeps the exported watermarks current: every {@code rdma.exporter.watermark.interval.ms}, on its own thread, it
 * finds the partition directories, asks the broker for their offsets and leaders, then brings each partition's
 * segments in line with its files and publishes its watermark. The exporter's other periodic chores run on the same
 * thread just before each refresh.
 */
final class WatermarkRefresher implements AutoCloseable {

    // Logged as the exporter, whose logger operators configure.
    private static final Logger LOG = LoggerFactory.getLogger(LogExporter.class);

    private final ExportedPartitions partitions;
    private final BrokerWatermarks broker;
    private final Duration interval;
    private final Runnable chores;
    private final AtomicLong refreshes = new AtomicLong();
    private final LogThrottlePerCause failures = new LogThrottlePerCause(Duration.ofMinutes(1));
    private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "rdma4j-log-exporter");
        t.setDaemon(true);
        return t;
    });
    private volatile boolean closed;

    /** @param chores what else the exporter does periodically, run before each scheduled refresh */
    WatermarkRefresher(ExportedPartitions partitions, BrokerWatermarks broker, Duration interval, Runnable chores) {
        this.partitions = partitions;
        this.broker = broker;
        this.interval = interval;
        this.chores = chores;
    }

    /** Starts the scheduled refreshes, the first one now. */
    void start() {
        scheduler.scheduleWithFixedDelay(this::refreshQuietly, 0, interval.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Runs one refresh on the caller's thread. */
    void refresh() throws IOException, InterruptedException {
        partitions.discover();
        if (partitions.isEmpty()) {
            partitions.closeRetiredDue();
            return;
        }
        // Asked before the files are looked at, so the segment list is at least as new as the high watermark.
        BrokerWatermarks.Answers answers = broker.ask(partitions.partitions());
        IOException failed = null;
        for (PartitionExport p : partitions.all()) {
            // Synced and published under the partition's lock as one step: a segment the cleaner just swapped in is
            // registered only by the publish, and a directory request in between would find the offsets it holds
            // not exported and send the consumer to Kafka's fetch path for a whole fallback period.
            synchronized (p) {
                try {
                    p.syncSegments();
                    publish(p, answers);
                } catch (IOException e) {
                    // One partition's files (truncated, vanishing) must not hold back the others' watermarks.
                    if (failed == null) {
                        failed = e;
                    } else {
                        failed.addSuppressed(e);
                    }
                }
            }
        }
        refreshes.incrementAndGet();
        partitions.closeRetiredDue();
        if (failed != null) {
            throw failed;
        }
    }

    /** Publishes {@code p}'s watermark from the broker's answers; one without its high watermark or log start waits. */
    private static void publish(PartitionExport p, BrokerWatermarks.Answers answers) throws IOException {
        TopicPartition tp = p.partition();
        Long highWatermark = answers.highWatermarks().get(tp);
        Long logStart = answers.logStartOffsets().get(tp);
        if (highWatermark == null || logStart == null) {
            return;
        }
        // Without the broker's last stable offset the previous one stands: the high watermark in its place would show
        // read_committed consumers open transactions.
        Long stable = answers.lastStableOffsets().get(tp);
        Watermark before = p.published();
        long lastStable = stable != null ? stable : before != null ? before.lastStableOffset() : logStart;
        p.publish(highWatermark, logStart, lastStable, answers.leaders().getOrDefault(tp, Watermark.UNKNOWN_LEADER));
        if (before == null && p.published() != null) {
            LOG.info("exporting {} (offsets {} to {})", tp, logStart, highWatermark);
        }
    }

    private void refreshQuietly() {
        if (closed) {
            return;
        }
        try {
            chores.run();
            refresh();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception | InternalError e) {
            // Whatever one refresh meets (an InternalError is the JVM's report of a fault in mapped memory), the
            // scheduled refreshes go on: a task that threw would never run again. A cause that lasts (a registered-memory
            // limit) fails every refresh, so one line a minute says it, with how many failed quietly since.
            long quiet = failures.loudOrQuiet(e);
            if (quiet >= 0) {
                LOG.warn("watermark refresh failed (retrying every {} ms{}): {}{}", interval.toMillis(),
                        quiet == 0 ? "" : "; " + quiet + " more failed so since the last line", e.toString(),
                        e.getSuppressed().length == 0 ? "" : " (and " + e.getSuppressed().length + " more in this refresh)");
            } else {
                LOG.debug("watermark refresh failed: {}", e.toString());
            }
        }
    }

    /** Refreshes run so far that reached the broker. */
    long refreshes() {
        return refreshes.get();
    }

    /** Stops the refreshes, waiting up to ten seconds for one under way. */
    @Override
    public void close() {
        closed = true;
        scheduler.shutdownNow();
        try {
            scheduler.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
