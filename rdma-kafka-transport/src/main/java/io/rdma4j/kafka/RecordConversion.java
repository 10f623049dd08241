package io.rdma4j.kafka;

import io.rdma4j.kafka.protocol.RecordBatchParser;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Deserializer;

import java.nio.ByteBuffer;
import java.util.Optional;

/** A record parsed from a batch read by RDMA, as the {@link ConsumerRecord} KafkaConsumer would return for it. */
final class RecordConversion {

    private RecordConversion() {
    }

    static <K, V> ConsumerRecord<K, V> toConsumerRecord(TopicPartition tp, RecordBatchParser.Batch batch, RecordBatchParser.ParsedRecord r, Optional<Integer> epoch,
                                                         Deserializer<K> keys, Deserializer<V> values) {
        RecordHeaders headers = new RecordHeaders(r.headers());
        byte[] keyBytes = r.key() == null ? null : toArray(r.key());
        byte[] valueBytes = r.value() == null ? null : toArray(r.value());
        K key;
        V value;
        try {
            key = keyBytes == null ? null : keys.deserialize(tp.topic(), headers, keyBytes);
        } catch (RuntimeException e) {
            throw deserializationFailure(RecordDeserializationException.DeserializationExceptionOrigin.KEY, tp, batch, r,
                    keyBytes, valueBytes, headers, e);
        }
        try {
            value = valueBytes == null ? null : values.deserialize(tp.topic(), headers, valueBytes);
        } catch (RuntimeException e) {
            throw deserializationFailure(RecordDeserializationException.DeserializationExceptionOrigin.VALUE, tp, batch, r,
                    keyBytes, valueBytes, headers, e);
        }
        return new ConsumerRecord<>(tp.topic(), tp.partition(), r.offset(), r.timestamp(), batch.timestampType(),
                keyBytes == null ? ConsumerRecord.NULL_SIZE : keyBytes.length,
                valueBytes == null ? ConsumerRecord.NULL_SIZE : valueBytes.length, key, value, headers, epoch);
    }

    /** What KafkaConsumer throws for a record its deserializers reject; the position stays on that record. */
    private static RecordDeserializationException deserializationFailure(
            RecordDeserializationException.DeserializationExceptionOrigin origin, TopicPartition tp,
            RecordBatchParser.Batch batch, RecordBatchParser.ParsedRecord r, byte[] keyBytes, byte[] valueBytes,
            RecordHeaders headers, RuntimeException cause) {
        return new RecordDeserializationException(origin, tp, r.offset(), r.timestamp(), batch.timestampType(),
                keyBytes == null ? null : ByteBuffer.wrap(keyBytes), valueBytes == null ? null : ByteBuffer.wrap(valueBytes),
                headers, "Error deserializing " + origin.name().toLowerCase(java.util.Locale.ROOT) + " for partition " + tp
                        + " at offset " + r.offset() + ". If needed, please seek past the record to continue consumption.",
                cause);
    }

    /** The bytes of {@code b}, left as it is: an absolute get, where a duplicate would be one more buffer per field. */
    private static byte[] toArray(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.get(b.position(), out);
        return out;
    }
}
