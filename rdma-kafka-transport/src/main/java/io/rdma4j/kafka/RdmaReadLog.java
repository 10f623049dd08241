package io.rdma4j.kafka;

import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The consumer's INFO lines about RDMA: one when a partition starts being read by RDMA (from which exporter, on which
 * provider) and one when it stops (why), none per fetch. A partition that keeps falling back for a reason already
 * logged flaps at DEBUG, so a flapping exporter cannot flood the log; one fetched through Kafka while its exporter
 * connection is set up, before RDMA read it, is at DEBUG too (a new consumer's start: nothing stopped).
 */
final class RdmaReadLog {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaKafkaConsumer.class);

    private final String provider;
    /** Partitions read by RDMA now, with their exporter. */
    private final Map<TopicPartition, InetSocketAddress> reading = new HashMap<>();
    /** Partitions whose last fallback repeated a reason already logged: their next start is DEBUG too. */
    private final Set<TopicPartition> quiet = new HashSet<>();
    private final Set<Map.Entry<TopicPartition, FallbackReason>> loggedFallbacks = new HashSet<>();

    RdmaReadLog(String provider) {
        this.provider = provider;
    }

    /** {@code tp} was just read by RDMA from {@code exporter}. */
    void read(TopicPartition tp, InetSocketAddress exporter) {
        InetSocketAddress before = reading.put(tp, exporter);
        if (exporter == null || exporter.equals(before)) {
            return;
        }
        if (quiet.remove(tp)) {
            LOG.debug("{} is read by RDMA again from the log exporter at {}", tp, exporter);
        } else {
            LOG.info("{} is read by RDMA from the log exporter at {} over {}", tp, exporter, provider);
        }
    }

    /** {@code tp} goes to Kafka's fetch path for {@code backoffMillis}, or {@code untilReady}: until RDMA is ready, if sooner. */
    void fellBack(TopicPartition tp, FallbackReason kind, String details, long backoffMillis, boolean untilReady) {
        boolean wasReading = reading.remove(tp) != null;
        if (kind == FallbackReason.EXPORTER_CONNECTING && !wasReading) {
            // A new consumer's (or a new leader's) connection on its way: RDMA has not started, so nothing stops.
            LOG.debug("{} is fetched through Kafka until its log exporter connection is ready: {}", tp, details);
            return;
        }
        if (loggedFallbacks.add(Map.entry(tp, kind))) {
            quiet.remove(tp);
            LOG.info("{} {} fetched through Kafka {} {} ms because {} ({}); logged once per partition and reason", tp,
                    wasReading ? "stops being read by RDMA: it is" : "is", untilReady ? "until that is ready, for at most" : "for",
                    backoffMillis, kind.words(), details);
        } else {
            quiet.add(tp);
            LOG.debug("{} falls back to the normal fetch path: {}", tp, details);
        }
    }

    /** These partitions are read no more, for {@code why} (revoked, lost, unassigned). */
    void stopped(Collection<TopicPartition> partitions, String why) {
        for (TopicPartition tp : partitions) {
            if (reading.remove(tp) != null) {
                LOG.info("{} stops being read by RDMA: {}", tp, why);
            }
        }
    }

    /** Partitions no longer assigned are read no more. */
    void retain(Set<TopicPartition> assigned, String why) {
        Collection<TopicPartition> gone = new ArrayList<>();
        for (TopicPartition tp : reading.keySet()) {
            if (!assigned.contains(tp)) {
                gone.add(tp);
            }
        }
        stopped(gone, why);
        quiet.retainAll(assigned);
        loggedFallbacks.removeIf(e -> !assigned.contains(e.getKey()));
    }

    void closed() {
        stopped(new ArrayList<>(reading.keySet()), "the consumer closed");
    }
}
