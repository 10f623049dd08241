package io.rdma4j.kafka;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.TopicPartition;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * Which assigned partitions RDMA serves now, with the internal consumer's pauses kept in step: the partitions RDMA
 * serves and those the application paused are paused there, the rest resumed (handed back at the position RDMA
 * reached). A partition RDMA cannot serve is left to Kafka's fetch for a fallback period. Used by the polling thread
 * only.
 */
final class ServedPartitions {

    /**
     * A fallback period: until a time, or until {@code settled} (completed by another thread) is done; until
     * {@code holdUntilNanos} (if sooner) Kafka's fetch is kept from the partition too ({@code rdma.fetch.setup.wait.ms}).
     */
    private record Window(long untilNanos, CompletableFuture<?> settled, long holdUntilNanos) {
        boolean open(long now) {
            return untilNanos - now > 0 && (settled == null || !settled.isDone());
        }

        /** For a window open at {@code now}: whether Kafka's fetch is kept from the partition too. */
        boolean holds(long now) {
            return holdUntilNanos - now > 0;
        }
    }

    private final Consumer<?, ?> delegate;
    /** Null when RDMA is off: then RDMA serves nothing. */
    private final RdmaFetcher fetcher;
    private final ReadPositions positions;
    private final RdmaReadLog readLog;
    private final RdmaFetchMetrics metrics;
    private final Set<TopicPartition> userPaused = new HashSet<>();
    private final Map<TopicPartition, Window> fallbacks = new HashMap<>();
    /**
     * Whether a subscription assigns the partitions: then RDMA serves only those {@link #handedOver} to this consumer
     * and not revoked since. Kafka's consumer of {@code group.protocol=consumer} changes the assignment on its
     * background thread, so {@code assignment()} may hold a partition whose assignment callback has not run yet, or
     * that is being revoked; Kafka's fetch serves neither.
     */
    private boolean groupManaged;
    private final Set<TopicPartition> handedOver = new HashSet<>();
    /** Which served partition the next poll fetches first. */
    private long rotation;

    ServedPartitions(Consumer<?, ?> delegate, RdmaFetcher fetcher, ReadPositions positions, RdmaReadLog readLog,
                     RdmaFetchMetrics metrics) {
        this.delegate = delegate;
        this.fetcher = fetcher;
        this.positions = positions;
        this.readLog = readLog;
        this.metrics = metrics;
    }

    /**
     * Forgets what is no longer assigned, then pauses, in the internal consumer, what RDMA serves or the application
     * paused, and resumes the rest.
     */
    void sync() {
        Set<TopicPartition> assigned = delegate.assignment();
        userPaused.retainAll(assigned); // KafkaConsumer forgets the pause of a revoked partition too.
        fallbacks.keySet().retainAll(assigned);
        handedOver.retainAll(assigned);
        positions.retain(assigned);
        readLog.retain(assigned, "it is no longer assigned to this consumer");
        metrics.retainPartitions(assigned);
        if (fetcher != null) {
            fetcher.retainPartitions(assigned);
        }
        Set<TopicPartition> held = new HashSet<>();
        List<TopicPartition> rdma = served(System.nanoTime(), held);
        metrics.served(Set.copyOf(rdma));
        Set<TopicPartition> wanted = new HashSet<>(userPaused);
        wanted.addAll(rdma);
        wanted.addAll(held); // Waiting for its exporter's connection, not fetched through Kafka meanwhile.
        Set<TopicPartition> paused = delegate.paused();
        List<TopicPartition> toPause = wanted.stream().filter(tp -> !paused.contains(tp)).toList();
        List<TopicPartition> toResume = paused.stream().filter(tp -> !wanted.contains(tp)).toList();
        if (!toPause.isEmpty()) {
            whileAssigned(toPause, delegate::pause);
        }
        // Every partition left to Kafka's fetch goes back at RDMA's position, paused or not: the application's
        // resume() may have resumed one RDMA read ahead of the internal consumer.
        for (TopicPartition tp : assigned) {
            if (!wanted.contains(tp)) {
                positions.handBack(tp);
            }
        }
        if (!toResume.isEmpty()) {
            whileAssigned(toResume, delegate::resume);
        }
    }

    /**
     * {@code action} (a pause, a resume) on those of {@code partitions} still assigned: under
     * {@code group.protocol=consumer} a revoked partition leaves the assignment on Kafka's background thread, and
     * KafkaConsumer rejects the whole call for it.
     */
    private void whileAssigned(List<TopicPartition> partitions, java.util.function.Consumer<List<TopicPartition>> action) {
        try {
            action.accept(partitions);
        } catch (IllegalStateException gone) {
            Set<TopicPartition> assigned = delegate.assignment();
            for (TopicPartition tp : partitions) {
                if (assigned.contains(tp)) {
                    try {
                        action.accept(List.of(tp));
                    } catch (IllegalStateException goneToo) {
                        // revoked meanwhile as well
                    }
                }
            }
        }
    }

    /** A subscription assigns the partitions from now on. */
    void subscribed() {
        groupManaged = true;
    }

    /** The application assigns the partitions (or none, unsubscribed). */
    void assignedManually() {
        groupManaged = false;
        handedOver.clear();
    }

    /** The group handed {@code partitions} over: their assignment callback runs now. */
    void handedOver(Collection<TopicPartition> partitions) {
        handedOver.addAll(partitions);
    }

    /** {@code partitions} are being revoked, or were lost: RDMA serves them no more. */
    void revoked(Collection<TopicPartition> partitions) {
        handedOver.removeAll(partitions);
    }

    /**
     * The partitions RDMA serves now, starting with the next one each time, as KafkaConsumer's fetches take turns: a
     * partition with a steady inflow cannot keep {@code max.poll.records} to itself.
     */
    List<TopicPartition> inTurn() {
        List<TopicPartition> order = served(System.nanoTime(), new HashSet<>());
        if (!order.isEmpty()) {
            Collections.rotate(order, -(int) (rotation++ % order.size()));
        }
        return order;
    }

    /** RDMA cannot serve {@code tp} now: Kafka's fetch serves it for {@code backoff}. */
    void fellBack(TopicPartition tp, Duration backoff) {
        fellBack(tp, backoff, null, Duration.ZERO);
    }

    /**
     * RDMA cannot serve {@code tp} now: Kafka's fetch serves it for {@code backoff}, or until {@code settled} (when not
     * null) completes, whichever comes first, but for its first {@code hold}, in which nothing fetches it. RDMA then
     * takes over at the position Kafka's fetch reached.
     */
    void fellBack(TopicPartition tp, Duration backoff, CompletableFuture<?> settled, Duration hold) {
        long now = System.nanoTime();
        fallbacks.put(tp, new Window(now + backoff.toNanos(), settled, now + hold.toNanos()));
    }

    /** As {@code KafkaConsumer.pause}, which validates the assignment. */
    void pause(Collection<TopicPartition> partitions) {
        delegate.pause(partitions);
        userPaused.addAll(partitions);
    }

    void resume(Collection<TopicPartition> partitions) {
        delegate.resume(partitions);
        userPaused.removeAll(partitions);
    }

    /** What the application paused (the internal consumer has RDMA's partitions paused too). */
    Set<TopicPartition> paused() {
        Set<TopicPartition> out = new HashSet<>(userPaused);
        out.retainAll(delegate.assignment());
        return out;
    }

    /**
     * Assigned partitions RDMA serves at {@code now}: not paused by the application and not in a fallback period; those
     * in a fallback period that keeps Kafka's fetch from them go to {@code held}. Each window is looked at once: looked
     * at again, it may have closed meanwhile (its connection set up on another thread, its period over), and a partition
     * found neither RDMA's nor held would be resumed for Kafka's fetch.
     */
    private List<TopicPartition> served(long now, Set<TopicPartition> held) {
        List<TopicPartition> out = new ArrayList<>();
        if (fetcher == null) {
            return out;
        }
        for (TopicPartition tp : delegate.assignment()) {
            if (groupManaged && !handedOver.contains(tp)) {
                continue;
            }
            Window w = fallbacks.get(tp);
            if (w != null && w.open(now)) {
                if (w.holds(now)) {
                    held.add(tp);
                }
                continue;
            }
            if (!userPaused.contains(tp)) {
                out.add(tp);
            }
        }
        return out;
    }
}
