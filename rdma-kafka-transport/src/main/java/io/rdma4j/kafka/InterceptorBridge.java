package io.rdma4j.kafka;

import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.Map;

/**
 * Installed in the internal KafkaConsumer in place of the user's interceptors, so that its commits
 * (auto-commits included) still reach them through {@code onCommit}, while {@code onConsume} is left to
 * {@link RdmaKafkaConsumer}, which applies it once to the merged RDMA and Kafka-fetched records.
 */
public final class InterceptorBridge<K, V> implements ConsumerInterceptor<K, V> {

    /** Config key under which {@link RdmaKafkaConsumer} hands its interceptor instances to the bridge. */
    static final String TARGETS = "rdma4j.internal.interceptors";
    private static final Logger LOG = LoggerFactory.getLogger(InterceptorBridge.class);

    private List<ConsumerInterceptor<K, V>> targets = List.of();

    /** The internal KafkaConsumer creates it from {@code interceptor.classes}. */
    public InterceptorBridge() {
    }

    @Override
    @SuppressWarnings("unchecked")
    public void configure(Map<String, ?> configs) {
        Object t = configs.get(TARGETS);
        if (t instanceof List<?> list) {
            targets = (List<ConsumerInterceptor<K, V>>) list;
        }
    }

    @Override
    public ConsumerRecords<K, V> onConsume(ConsumerRecords<K, V> records) {
        return records;
    }

    @Override
    public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {
        for (ConsumerInterceptor<K, V> t : targets) {
            try {
                t.onCommit(offsets);
            } catch (Exception e) {
                // As KafkaConsumer does: an interceptor's failure is logged, never propagated.
                LOG.warn("Error executing interceptor onCommit callback", e);
            }
        }
    }

    @Override
    public void close() {
        // The targets belong to RdmaKafkaConsumer, which closes them.
    }
}
