package io.rdma4j.kafka;

import io.rdma4j.kafka.protocol.SegmentDirectory;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;

/**
 * The positions of partitions that RDMA read past the internal consumer's own position. {@code KafkaConsumer} logs
 * every {@code seek} at INFO, so RDMA reads do not move its positions: they are kept here, and whatever reads positions
 * (position(), commits, auto-commit) takes them from here first. A partition goes back to Kafka's fetch path with
 * one seek ({@link #handBack}). Where a position is not known yet, it also tells where the internal consumer's offset
 * reset is expected to go ({@link #resetGuess}).
 */
final class ReadPositions {

    /** Where RDMA left a partition ({@code next}), and the internal consumer's position then ({@code base}). */
    private record Ahead(OffsetAndMetadata next, long base) {
    }

    private final Consumer<?, ?> delegate;
    private final Map<TopicPartition, Ahead> ahead = new HashMap<>();
    /**
     * Partitions revoked while RDMA was ahead of the internal consumer: its position there is behind what was
     * returned, so commits leave them out while they stay assigned (under {@code group.protocol=consumer}, a moment
     * after their revocation callback). Seeking them instead would log a line per partition at every rebalance.
     */
    private final Set<TopicPartition> revokedBehind = new HashSet<>();

    /**
     * Where the internal consumer's offset reset of a partition is expected to go ({@link SegmentDirectory.Request#EARLIEST}
     * or {@link SegmentDirectory.Request#LATEST}), where {@code seekToBeginning} or {@code seekToEnd} said so, until its
     * position is known; {@link #NO_GUESS} where it cannot be told. The others go by {@link #resetByConfig}.
     */
    private final Map<TopicPartition, Long> resetTo = new HashMap<>();
    /**
     * Where {@code auto.offset.reset} sends a partition without a position, or {@link #NO_GUESS}: also where the
     * consumer has a {@code group.id}, whose committed offsets, unknown here, come first (a restarting group's
     * partitions would each cost the exporter a lookup from the wrong place).
     */
    private final long resetByConfig;
    /** Whether {@code isolation.level=read_committed}: its latest offset is the last stable one, which no sentinel names. */
    private final boolean readCommitted;

    private static final long NO_GUESS = Long.MIN_VALUE;

    /** @param inGroup whether the consumer has a {@code group.id} (so partitions may start at committed offsets) */
    ReadPositions(Consumer<?, ?> delegate, String autoOffsetReset, boolean inGroup, boolean readCommitted) {
        this.delegate = delegate;
        this.readCommitted = readCommitted;
        this.resetByConfig = inGroup ? NO_GUESS : switch (autoOffsetReset.trim().toLowerCase(java.util.Locale.ROOT)) {
            case "earliest" -> SegmentDirectory.Request.EARLIEST;
            case "latest" -> latest();
            default -> NO_GUESS; // none, by_duration:...: no sentinel names where those go
        };
    }

    /** The next offset to read from {@code tp}, as {@code KafkaConsumer.position} (it may block to learn it). */
    long position(TopicPartition tp, Duration timeout) {
        Ahead a = ahead.get(tp);
        return a != null ? a.next().offset() : positioned(tp, delegate.position(tp, timeout));
    }

    long position(TopicPartition tp) {
        Ahead a = ahead.get(tp);
        return a != null ? a.next().offset() : positioned(tp, delegate.position(tp));
    }

    private long positioned(TopicPartition tp, long position) {
        if (!resetTo.isEmpty()) {
            resetTo.remove(tp); // reset done: a later one (out of range) goes by auto.offset.reset
        }
        return position;
    }

    /** Where a reset to the end goes, if a sentinel names it: under read_committed the last stable offset, which none does. */
    private long latest() {
        return readCommitted ? NO_GUESS : SegmentDirectory.Request.LATEST;
    }

    /**
     * These partitions are reset to their beginning ({@code earliest}) or end ({@code latest}): their positions here
     * are forgotten ({@link #forget}), and {@code seekToBeginning} and {@code seekToEnd} go there whatever the group
     * committed.
     */
    void resetting(Collection<TopicPartition> partitions, boolean toEnd) {
        forget(partitions);
        long to = toEnd ? latest() : SegmentDirectory.Request.EARLIEST;
        for (TopicPartition tp : partitions) {
            resetTo.put(tp, to);
        }
    }

    /**
     * Where the offset reset of {@code tp}, whose position is not known yet, is expected to go: the offset a
     * directory lookup can be sent from before it is done. Empty where it cannot be told.
     */
    OptionalLong resetGuess(TopicPartition tp) {
        long to = resetTo.getOrDefault(tp, resetByConfig);
        return to == NO_GUESS ? OptionalLong.empty() : OptionalLong.of(to);
    }

    /** RDMA read {@code tp} up to {@code next} (its records before it were returned). */
    void advance(TopicPartition tp, long next, Optional<Integer> leaderEpoch) {
        Ahead a = ahead.get(tp);
        long base = a != null ? a.base() : delegate.position(tp);
        if (next == base) {
            ahead.remove(tp);
        } else {
            ahead.put(tp, new Ahead(new OffsetAndMetadata(next, leaderEpoch, ""), base));
        }
    }

    /** The internal consumer's position of these partitions is theirs again (a seek, a loss, a new assignment). */
    void forget(Collection<TopicPartition> partitions) {
        ahead.keySet().removeAll(partitions);
        revokedBehind.removeAll(partitions);
        resetTo.keySet().removeAll(partitions);
    }

    /** These partitions are revoked: RDMA reads them no more, and what it returned is committed no more either. */
    void revoke(Collection<TopicPartition> partitions) {
        resetTo.keySet().removeAll(partitions); // assigned again, it starts at the group's committed offset
        for (TopicPartition tp : partitions) {
            if (ahead.remove(tp) != null) {
                revokedBehind.add(tp);
            }
        }
    }

    void forgetAll() {
        ahead.clear();
        revokedBehind.clear();
        resetTo.clear();
    }

    void retain(Set<TopicPartition> assigned) {
        ahead.keySet().retainAll(assigned);
        revokedBehind.retainAll(assigned);
        resetTo.keySet().retainAll(assigned);
    }

    /** Moves the internal consumer to where RDMA left {@code tp}, before Kafka's fetch path takes it over. */
    void handBack(TopicPartition tp) {
        Ahead a = ahead.remove(tp);
        if (a != null) {
            try {
                delegate.seek(tp, a.next().offset());
            } catch (IllegalStateException revoked) {
                // no longer assigned (group.protocol=consumer removes it on Kafka's background thread): nothing to move
            }
        }
    }

    /**
     * What {@code KafkaConsumer} would commit now for its assigned partitions: the position of each whose position is
     * known, RDMA's where it read ahead. A partition without a position yet is left out, as Kafka leaves it out.
     */
    Map<TopicPartition, OffsetAndMetadata> consumed() {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (TopicPartition tp : delegate.assignment()) {
            if (revokedBehind.contains(tp)) {
                continue;
            }
            Ahead a = ahead.get(tp);
            if (a != null) {
                out.put(tp, a.next());
                continue;
            }
            try {
                // A known position is answered at once; an unknown one is not waited for.
                out.put(tp, new OffsetAndMetadata(delegate.position(tp, Duration.ZERO)));
            } catch (TimeoutException e) {
                // not positioned yet: nothing to commit for it
            }
        }
        return out;
    }

    /** {@code delegateLag} (the internal consumer's lag of {@code tp}) less what RDMA read ahead of it. */
    long lag(TopicPartition tp, long delegateLag) {
        Ahead a = ahead.get(tp);
        return a == null ? delegateLag : Math.max(0, delegateLag - (a.next().offset() - a.base()));
    }
}
