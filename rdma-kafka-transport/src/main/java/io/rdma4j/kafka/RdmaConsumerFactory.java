package io.rdma4j.kafka;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.Deserializer;

import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

/**
 * Creates a consumer from properties alone, for frameworks: an {@link RdmaKafkaConsumer} when
 * {@code rdma.fetch.enabled=true}, otherwise a plain {@link KafkaConsumer} (with the {@code rdma.*} keys removed).
 */
public final class RdmaConsumerFactory {

    private RdmaConsumerFactory() {
    }

    /** Deserializers may be null: they are then created from {@code key.deserializer}/{@code value.deserializer}. */
    public static <K, V> Consumer<K, V> create(Map<String, Object> configs, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
        if (RdmaConsumerConfig.enabled(configs)) {
            return new RdmaKafkaConsumer<>(configs, keyDeserializer, valueDeserializer);
        }
        return new KafkaConsumer<>(RdmaConsumerConfig.kafkaConfigs(configs), keyDeserializer, valueDeserializer);
    }

    public static <K, V> Consumer<K, V> create(Properties properties, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
        Map<String, Object> map = new HashMap<>();
        properties.stringPropertyNames().forEach(k -> map.put(k, properties.getProperty(k)));
        properties.forEach((k, v) -> map.putIfAbsent(k.toString(), v));
        return create(map, keyDeserializer, valueDeserializer);
    }
}
