package io.rdma4j.kafka;

import io.rdma4j.kafka.protocol.RecordBatchParser;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.utils.BufferSupplier;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Turns the batches of one range read by RDMA into the records a poll returns, as KafkaConsumer's
 * {@code CompletedFetch} does: every batch's CRC32C is verified before any record of it is used, aborted
 * transactions and control batches are dropped, and records are converted with the application's deserializers, up
 * to {@code max.poll.records}. Uncompressed batches are parsed in place in the registered buffer. Used by the
 * polling thread only.
 */
final class RecordCollector implements AutoCloseable {

    /**
     * Records from a range, the offset after them and the byte of the range where the next fetch goes on (the batch
     * a fetch stopped in, or the end of the last batch used), with the leader epoch of the last batch reached.
     */
    record Collected<K, V>(List<ConsumerRecord<K, V>> records, long nextOffset, long nextPosition, Optional<Integer> leaderEpoch) {
    }

    /** Never null: {@link RdmaFetchMetrics#detached()} where nobody reads the counts. */
    private final RdmaFetchMetrics metrics;
    /** Working buffers of the decompression codecs, reused across batches. */
    private final BufferSupplier decompressionBuffers = BufferSupplier.create();

    RecordCollector(RdmaFetchMetrics metrics) {
        this.metrics = metrics;
    }

    /**
     * The records of {@code tp} from offset {@code position} in the first {@code usable} batches of {@code decoded}.
     *
     * @param bytePosition where the range starts in its segment
     * @param aborted      drops the batches of aborted transactions (read_committed), or null to drop none
     */
    <K, V> Collected<K, V> collect(TopicPartition tp, DecodedBatches decoded, int usable, ReadCommittedFilter aborted,
                                   long position, long bytePosition, int maxRecords, Deserializer<K> keys, Deserializer<V> values) {
        int verifiedBatches = 0;
        long verifiedBytes = 0;
        List<ConsumerRecord<K, V>> out = new ArrayList<>();
        long next = position;
        long pos = bytePosition;
        Optional<Integer> epoch = Optional.empty();
        List<RecordBatchParser.Batch> read = decoded.batches().subList(0, usable);
        try {
            batches:
            for (int i = 0; i < read.size(); i++) {
                RecordBatchParser.Batch batch = read.get(i);
                decoded.ensureValid(i); // CRC32C over the batch: a corrupt batch is never returned.
                verifiedBatches++;
                verifiedBytes += batch.sizeInBytes();
                if (batch.lastOffset() < position) {
                    pos += batch.sizeInBytes();
                    continue;
                }
                epoch = batch.partitionLeaderEpoch() < 0
                        ? Optional.empty() : Optional.of(batch.partitionLeaderEpoch());
                if (aborted != null && aborted.isAborted(batch)) {
                    next = Math.max(next, batch.nextOffset());
                    pos += batch.sizeInBytes();
                    continue;
                }
                if (!batch.isControlBatch()) {
                    for (RecordBatchParser.ParsedRecord r : decoded.records(i, decompressionBuffers)) {
                        if (r.offset() < next) {
                            continue;
                        }
                        if (out.size() == maxRecords) {
                            break batches; // The cursor stays on this batch; the rest is read next time.
                        }
                        ConsumerRecord<K, V> record;
                        try {
                            record = RecordConversion.toConsumerRecord(tp, batch, r, epoch, keys, values);
                        } catch (RecordDeserializationException e) {
                            if (out.isEmpty()) {
                                throw e;
                            }
                            // As KafkaConsumer: the records before it first; the next poll throws, at its offset.
                            break batches;
                        }
                        out.add(record);
                        next = r.offset() + 1;
                    }
                    decoded.converted(i); // every record of it used: nothing reads its inflated bytes any more
                }
                next = Math.max(next, batch.nextOffset());
                pos += batch.sizeInBytes();
            }
            return new Collected<>(out, next, pos, epoch);
        } finally {
            // Once per fetch, not per batch: a Kafka sensor records under a lock and with a clock read.
            if (verifiedBatches > 0) {
                metrics.batches(verifiedBatches, verifiedBytes);
            }
        }
    }

    @Override
    public void close() {
        decompressionBuffers.close();
    }
}
