package io.rdma4j.kafka;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.common.serialization.Deserializer;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;

/**
 * The deserializers and interceptors a consumer's configs name, created and configured as {@code KafkaConsumer} creates
 * them: {@link RdmaKafkaConsumer} deserializes and intercepts the records it reads by RDMA itself.
 */
final class ConsumerPlugins {

    private ConsumerPlugins() {
    }

    @SuppressWarnings("unchecked")
    static <T> Deserializer<T> newDeserializer(Map<String, Object> configs, String key, boolean isKey) {
        Object v = configs.get(key);
        if (v == null) {
            throw new IllegalArgumentException("set " + key + " or pass a deserializer instance");
        }
        Deserializer<T> d = (Deserializer<T>) instantiate(v);
        d.configure(configs, isKey);
        return d;
    }

    @SuppressWarnings("unchecked")
    static <K, V> List<ConsumerInterceptor<K, V>> newInterceptors(Map<String, Object> configs) {
        Object v = configs.get(ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG);
        List<Object> items = new ArrayList<>();
        if (v instanceof Collection<?> c) {
            items.addAll(c);
        } else if (v != null) {
            for (String s : v.toString().split(",")) {
                if (!s.isBlank()) {
                    items.add(s.trim());
                }
            }
        }
        List<ConsumerInterceptor<K, V>> out = new ArrayList<>();
        for (Object item : items) {
            ConsumerInterceptor<K, V> i = (ConsumerInterceptor<K, V>) instantiate(item);
            i.configure(configs);
            out.add(i);
        }
        return List.copyOf(out);
    }

    static Object instantiate(Object classOrName) {
        try {
            Class<?> c = classOrName instanceof Class<?> k ? k
                    : Class.forName(classOrName.toString().trim(), true, Thread.currentThread().getContextClassLoader());
            return c.getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalArgumentException("cannot create " + classOrName + ": it needs a public no-argument constructor", e);
        }
    }
}
