package io.rdma4j.kafka.exporter;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Lets one event per interval be logged at a loud level and sends the rest to a quiet one, counting them so that the
 * next loud line can say how many went quietly: a peer that gets itself refused as fast as it can must not flood the
 * log. Lock-free. (rdma-core's TransportMetrics does the same for the transport's own rejections, bound to its
 * counters; this is the exporter's, for what it refuses above the transport.)
 */
final class LogThrottle {

    private final long intervalNanos;
    private final AtomicLong lastLoudNanos;
    private final AtomicLong quietSinceLoud = new AtomicLong();

    LogThrottle(Duration interval) {
        this.intervalNanos = interval.toNanos();
        this.lastLoudNanos = new AtomicLong(System.nanoTime() - intervalNanos);
    }

    /** For one event: -1 when it goes quietly, else it goes loudly and this is how many went quietly before it. */
    long loudOrQuiet() {
        long now = System.nanoTime();
        long last = lastLoudNanos.get();
        if (now - last >= intervalNanos && lastLoudNanos.compareAndSet(last, now)) {
            return quietSinceLoud.getAndSet(0);
        }
        quietSinceLoud.incrementAndGet();
        return -1;
    }
}
