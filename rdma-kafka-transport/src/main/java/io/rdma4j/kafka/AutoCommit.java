package io.rdma4j.kafka;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RetriableCommitFailedException;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;

/**
 * {@code enable.auto.commit} done for the internal consumer, which would commit its own positions: those RDMA read
 * past ({@link ReadPositions}) would go back. As {@code KafkaConsumer} does, it commits every
 * {@code auto.commit.interval.ms} before a poll fetches, and synchronously before partitions are revoked and on close.
 */
final class AutoCommit {

    private static final Logger LOG = LoggerFactory.getLogger(AutoCommit.class);

    private final Consumer<?, ?> delegate;
    private final Supplier<Map<TopicPartition, OffsetAndMetadata>> consumed;
    private final long intervalNanos;
    private long dueNanos;

    private AutoCommit(Consumer<?, ?> delegate, Supplier<Map<TopicPartition, OffsetAndMetadata>> consumed, long intervalMillis) {
        this.delegate = delegate;
        this.consumed = consumed;
        this.intervalNanos = Duration.ofMillis(intervalMillis).toNanos();
        this.dueNanos = System.nanoTime() + intervalNanos;
    }

    /**
     * Takes auto-commit over from the internal consumer where it is on (a group and {@code enable.auto.commit}, which
     * defaults to true): turns it off in {@code kafkaConfigs} and says whether it did. Without a group the setting is
     * left to Kafka, which refuses {@code true} there.
     */
    static boolean takeOver(Map<String, Object> kafkaConfigs) {
        Object enabled = kafkaConfigs.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
        boolean on = RdmaConsumerConfig.inGroup(kafkaConfigs)
                && (enabled == null || Boolean.parseBoolean(enabled.toString().trim().toLowerCase(Locale.ROOT)));
        if (on) {
            kafkaConfigs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        }
        return on;
    }

    static AutoCommit of(Consumer<?, ?> delegate, Supplier<Map<TopicPartition, OffsetAndMetadata>> consumed, Map<String, Object> kafkaConfigs) {
        Object interval = kafkaConfigs.get(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG);
        return new AutoCommit(delegate, consumed, interval == null ? 5000 : Long.parseLong(interval.toString().trim()));
    }

    /** Before a poll fetches: commits what earlier polls returned once the interval is up, without waiting. */
    void beforePoll() {
        long now = System.nanoTime();
        if (now - dueNanos < 0) {
            return;
        }
        dueNanos = now + intervalNanos;
        Map<TopicPartition, OffsetAndMetadata> offsets = consumed.get();
        if (offsets.isEmpty()) {
            return;
        }
        delegate.commitAsync(offsets, (committed, e) -> {
            if (e instanceof RetriableCommitFailedException) {
                LOG.debug("auto-commit of {} failed, the next one retries: {}", committed, e.toString());
            } else if (e != null) {
                LOG.warn("auto-commit of offsets {} failed: {}", committed, e.toString());
            }
        });
    }

    /** Before partitions are revoked, and before the consumer closes: commits and waits, as Kafka does. */
    void now(String when) {
        Map<TopicPartition, OffsetAndMetadata> offsets = consumed.get();
        if (offsets.isEmpty()) {
            return;
        }
        try {
            delegate.commitSync(offsets);
        } catch (org.apache.kafka.common.errors.WakeupException | org.apache.kafka.common.errors.InterruptException e) {
            throw e;
        } catch (RuntimeException e) {
            // Kafka logs a failed auto-commit and goes on (the rebalance, the close).
            LOG.warn("auto-commit of offsets {} {} failed: {}", offsets, when, e.toString());
        }
    }
}
