package io.rdma4j.kafka.exporter;

import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the broker says about the exported partitions, asked through its Admin API at each refresh: every partition's
 * high watermark, last stable offset and log start offset, and, at most once a {@link #LEADERS_INTERVAL_NANOS}, its
 * leader. Each partition's answer is taken on its own: one the broker does not answer (being deleted, its leader gone)
 * is left out and does not hold back the others.
 */
final class BrokerWatermarks {

    // Logged as the exporter, whose logger operators configure.
    private static final Logger LOG = LoggerFactory.getLogger(LogExporter.class);
    /**
     * How often the partitions' leaders are learnt (one metadata request): consumers that read from a leader's exporter
     * move to the new leader's within about this much after an election.
     */
    private static final long LEADERS_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(1);
    /**
     * The longest a refresh waits for the broker's answers. A partition whose leader just died is not answered until
     * the cluster elects another (seconds); meanwhile it keeps its last watermark, and the other partitions' watermarks
     * move on.
     */
    private static final long ANSWER_WAIT_NANOS = TimeUnit.SECONDS.toNanos(1);

    /**
     * The broker's answers for one refresh. A partition it did not answer in time is absent from the offsets it did not
     * give; one whose leader is unknown is absent from {@code leaders}.
     */
    record Answers(Map<TopicPartition, Long> highWatermarks, Map<TopicPartition, Long> lastStableOffsets,
                   Map<TopicPartition, Long> logStartOffsets, Map<TopicPartition, Integer> leaders) {
    }

    private final Admin admin;
    private final AtomicLong requests = new AtomicLong();
    /** Each exported partition's leader (node id), as last learnt; a partition whose leader is unknown is absent. */
    private volatile Map<TopicPartition, Integer> leaders = Map.of();
    /** When the leaders were last learnt; the first refresh learns them. */
    private long leadersLearntNanos = System.nanoTime() - LEADERS_INTERVAL_NANOS;

    BrokerWatermarks(Admin admin) {
        this.admin = admin;
    }

    /** Asks the broker about {@code asked}, waiting at most {@link #ANSWER_WAIT_NANOS} for its answers. */
    Answers ask(List<TopicPartition> asked) throws InterruptedException {
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
        for (TopicPartition tp : asked) {
            latest.put(tp, OffsetSpec.latest());
            earliest.put(tp, OffsetSpec.earliest());
        }
        // Asked at once and awaited together, each partition on its own: one without an answer must not hold back
        // the others.
        long deadline = System.nanoTime() + ANSWER_WAIT_NANOS;
        ListOffsetsResult hwAnswer = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED));
        ListOffsetsResult lsoAnswer = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED));
        ListOffsetsResult startAnswer = admin.listOffsets(earliest);
        requests.addAndGet(3);
        boolean learnLeaders = System.nanoTime() - leadersLearntNanos >= LEADERS_INTERVAL_NANOS;
        var leadersAnswer = learnLeaders ? describe(asked) : null;
        Map<TopicPartition, Long> hw = offsets(hwAnswer, asked, deadline);
        Map<TopicPartition, Long> lso = offsets(lsoAnswer, asked, deadline);
        Map<TopicPartition, Long> start = offsets(startAnswer, asked, deadline);
        if (learnLeaders) {
            leaders = leaders(leadersAnswer, deadline);
            leadersLearntNanos = System.nanoTime();
            requests.incrementAndGet();
        }
        return new Answers(hw, lso, start, leaders);
    }

    /** The leader last learnt for {@code tp}, or {@link Watermark#UNKNOWN_LEADER}. */
    int leader(TopicPartition tp) {
        return leaders.getOrDefault(tp, Watermark.UNKNOWN_LEADER);
    }

    /** Admin requests sent so far. */
    long requests() {
        return requests.get();
    }

    // One partition failing (being deleted, its leader gone) must not stop the others from being refreshed.
    private static Map<TopicPartition, Long> offsets(ListOffsetsResult result, Iterable<TopicPartition> asked, long deadline)
            throws InterruptedException {
        Map<TopicPartition, Long> out = new HashMap<>();
        for (TopicPartition tp : asked) {
            try {
                out.put(tp, result.partitionResult(tp).get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS).offset());
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                    LOG.debug("no offsets for {}: {}", tp, e.getCause().toString());
                }
            } catch (TimeoutException e) {
                LOG.debug("no offsets for {} within {} ms; it keeps its last watermark", tp, TimeUnit.NANOSECONDS.toMillis(ANSWER_WAIT_NANOS));
            }
        }
        return out;
    }

    private Map<String, KafkaFuture<TopicDescription>> describe(List<TopicPartition> asked) {
        Set<String> topics = new HashSet<>();
        asked.forEach(tp -> topics.add(tp.topic()));
        return admin.describeTopics(topics).topicNameValues();
    }

    /** The partitions' leaders from the cluster's metadata; a topic not described in time is left out (leader unknown). */
    private static Map<TopicPartition, Integer> leaders(Map<String, KafkaFuture<TopicDescription>> described, long deadline)
            throws InterruptedException {
        Map<TopicPartition, Integer> out = new HashMap<>();
        for (var e : described.entrySet()) {
            try {
                var description = e.getValue().get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                for (TopicPartitionInfo info : description.partitions()) {
                    if (info.leader() != null && !info.leader().isEmpty()) {
                        out.put(new TopicPartition(e.getKey(), info.partition()), info.leader().id());
                    }
                }
            } catch (ExecutionException | TimeoutException ex) {
                LOG.debug("no leaders for topic {}: {}", e.getKey(), ex.toString());
            }
        }
        return out;
    }
}
