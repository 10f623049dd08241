package io.rdma4j.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.serialization.Deserializer;

import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The RDMA share of one poll: the partitions RDMA serves are fetched in turn, each up to what
 * {@code max.poll.records} leaves after the records before it (and, once records are in hand, for a short while
 * only), their positions moved on, and their records merged with those the internal consumer's poll returned. Used by
 * the polling thread only.
 */
final class PollMerge<K, V> {

    /**
     * Whether the Kafka clients on the class path have {@code ConsumerRecords.nextOffsets()} (4.0 and later). The 3.9
     * clients of Spring Boot 3.5 have not: there poll() returns records without next offsets, as their own
     * KafkaConsumer does. Asked once of Kafka's public API, since the two lines cannot be told apart otherwise.
     */
    private static final boolean CLIENTS_HAVE_NEXT_OFFSETS = hasMethod(ConsumerRecords.class, "nextOffsets");
    /**
     * Once a poll holds records, it starts no further partition's fetch after this long: a fetch that waits for the
     * exporter (a new consumer's lookups, bytes not read ahead yet) would hold back the records in hand, where
     * KafkaConsumer returns what its completed fetches hold. The next poll starts with the next partition in turn.
     */
    private static final long HOLD_RECORDS_NANOS = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(2);

    private final RdmaFetcher fetcher;
    private final ServedPartitions served;
    private final ReadPositions positions;
    private final RdmaReadLog readLog;
    private final Deserializer<K> keys;
    private final Deserializer<V> values;
    private final int maxPollRecords;
    private final int maxPartitionFetchBytes;
    /** {@code rdma.fetch.fallback.backoff.ms}: how long a partition RDMA cannot serve is left to Kafka's fetch. */
    private final Duration fallbackBackoff;
    /** {@code rdma.fetch.setup.wait.ms}: how long a partition waits for its exporter connection before Kafka's fetch serves it. */
    private final Duration setupWait;

    PollMerge(RdmaFetcher fetcher, ServedPartitions served, ReadPositions positions, RdmaReadLog readLog,
              Deserializer<K> keys, Deserializer<V> values, int maxPollRecords, int maxPartitionFetchBytes,
              Duration fallbackBackoff, Duration setupWait) {
        this.fetcher = fetcher;
        this.served = served;
        this.positions = positions;
        this.readLog = readLog;
        this.keys = keys;
        this.values = values;
        this.maxPollRecords = maxPollRecords;
        this.maxPartitionFetchBytes = maxPartitionFetchBytes;
        this.fallbackBackoff = fallbackBackoff;
        this.setupWait = setupWait;
    }

    /**
     * {@code fromKafka} with the records RDMA read, or null when neither has any. A record the deserializers reject
     * is thrown when it comes first, else it waits for the next poll (as KafkaConsumer does).
     */
    ConsumerRecords<K, V> merge(ConsumerRecords<K, V> fromKafka) {
        Map<TopicPartition, List<ConsumerRecord<K, V>>> merged = new LinkedHashMap<>();
        Map<TopicPartition, OffsetAndMetadata> nextOffsets = CLIENTS_HAVE_NEXT_OFFSETS ? new HashMap<>(fromKafka.nextOffsets()) : null;
        for (TopicPartition tp : fromKafka.partitions()) {
            merged.put(tp, fromKafka.records(tp));
        }
        int budget = maxPollRecords - fromKafka.count();
        long started = System.nanoTime();
        List<TopicPartition> turn = served.inTurn();
        fetcher.connectAhead(turn);
        boolean lookedAhead = false;
        for (TopicPartition tp : turn) {
            if (budget <= 0 || !merged.isEmpty() && System.nanoTime() - started > HOLD_RECORDS_NANOS) {
                break;
            }
            if (merged.containsKey(tp)) {
                continue;
            }
            FetchResult.Fallback notReady = fetcher.notReady(tp); // Not waiting for the position first: Kafka's fetch starts sooner.
            if (notReady != null) {
                fellBack(tp, notReady);
                continue;
            }
            // The lookups go out together, before this partition's fetch waits for its own. A new consumer's
            // positions wait for the offset reset: its lookups go out for where that is expected to go, and those it
            // missed once the positions are known (then mostly all of them are).
            boolean resetting = !lookedAhead && fetcher.lookUpAhead(turn, positions);
            lookedAhead = true;
            long position = positions.position(tp);
            if (resetting) {
                fetcher.lookUpAhead(turn, positions);
            }
            FetchResult result;
            try {
                result = fetcher.fetch(tp, position, budget, maxPartitionFetchBytes, keys, values);
            } catch (RecordDeserializationException e) {
                if (merged.isEmpty()) {
                    throw e;
                }
                break; // return what other partitions gave first; the next poll throws (as KafkaConsumer does)
            }
            switch (result) {
                case FetchResult.Records<?, ?> r -> {
                    @SuppressWarnings("unchecked")
                    FetchResult.Records<K, V> records = (FetchResult.Records<K, V>) r;
                    if (records.nextOffset() != position) {
                        positions.advance(tp, records.nextOffset(), records.leaderEpoch());
                    }
                    readLog.read(tp, fetcher.exporterOf(tp));
                    if (!records.records().isEmpty()) {
                        merged.put(tp, records.records());
                        if (nextOffsets != null) {
                            nextOffsets.put(tp, new OffsetAndMetadata(records.nextOffset(), records.leaderEpoch(), ""));
                        }
                        budget -= records.records().size();
                    }
                }
                case FetchResult.Fallback f -> fellBack(tp, f);
            }
        }
        if (merged.isEmpty()) {
            return null;
        }
        return nextOffsets != null ? new ConsumerRecords<>(merged, nextOffsets) : new ConsumerRecords<>(merged);
    }

    /** Kafka's fetch serves {@code tp} for the fallback period, or until what RDMA waits for is done. */
    private void fellBack(TopicPartition tp, FetchResult.Fallback f) {
        readLog.fellBack(tp, f.kind(), f.reason(), fallbackBackoff.toMillis(), f.settled() != null);
        served.fellBack(tp, fallbackBackoff, f.settled(), f.settled() == null ? Duration.ZERO : setupWait);
    }

    private static boolean hasMethod(Class<?> type, String name) {
        try {
            type.getMethod(name);
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }
}
