package io.rdma4j.spring.boot.kafka;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.Deserializer;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationContextAware;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Map;

/**
 * Replaces each {@link DefaultKafkaConsumerFactory} bean whose configuration has
 * {@code rdma.fetch.enabled=true} by one that creates consumers through a static
 * {@code Consumer create(Map<String,Object>, Deserializer, Deserializer)} of the named class. The
 * class is looked up by name because the starter does not depend on the Kafka module.
 */
public class RdmaKafkaConsumerFactoryPostProcessor implements BeanPostProcessor, ApplicationContextAware {

    /** The Kafka module's factory of RDMA consumers. */
    public static final String RDMA_CONSUMER_FACTORY = "io.rdma4j.kafka.RdmaConsumerFactory";
    /** The consumer property that turns RDMA fetch on. */
    public static final String FETCH_ENABLED = "rdma.fetch.enabled";

    private final String factoryClassName;
    private ApplicationContext applicationContext;
    private volatile MethodHandle create;

    public RdmaKafkaConsumerFactoryPostProcessor(String factoryClassName) {
        this.factoryClassName = factoryClassName;
    }

    @Override
    public void setApplicationContext(ApplicationContext applicationContext) {
        this.applicationContext = applicationContext;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) throws BeansException {
        if (!(bean instanceof DefaultKafkaConsumerFactory<?, ?> original) || bean instanceof RdmaConsumerFactoryAdapter<?, ?>
                || !Boolean.parseBoolean(String.valueOf(original.getConfigurationProperties().get(FETCH_ENABLED)))) {
            return bean;
        }
        return adapt(original, beanName);
    }

    private <K, V> RdmaConsumerFactoryAdapter<K, V> adapt(DefaultKafkaConsumerFactory<K, V> original, String beanName) {
        RdmaConsumerFactoryAdapter<K, V> adapted = new RdmaConsumerFactoryAdapter<>(original, creator());
        adapted.setBeanName(beanName);
        if (applicationContext != null) {
            adapted.setApplicationContext(applicationContext);
        }
        return adapted;
    }

    private MethodHandle creator() {
        MethodHandle handle = create;
        if (handle == null) {
            try {
                Class<?> factory = Class.forName(factoryClassName, true, getClass().getClassLoader());
                handle = MethodHandles.publicLookup().findStatic(factory, "create",
                        MethodType.methodType(Consumer.class, Map.class, Deserializer.class, Deserializer.class));
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("rdma.fetch.enabled=true needs " + factoryClassName
                        + " with a public static Consumer create(Map, Deserializer, Deserializer); add io.rdma4j:rdma-kafka-transport", e);
            }
            create = handle;
        }
        return handle;
    }

    /** Keeps the original factory's configuration; only the raw consumer comes from rdma4j. */
    static final class RdmaConsumerFactoryAdapter<K, V> extends DefaultKafkaConsumerFactory<K, V> {
        private final MethodHandle create;

        RdmaConsumerFactoryAdapter(DefaultKafkaConsumerFactory<K, V> original, MethodHandle create) {
            super(original.getConfigurationProperties(), original::getKeyDeserializer, original::getValueDeserializer);
            this.create = create;
            original.getListeners().forEach(this::addListener);
            original.getPostProcessors().forEach(this::addPostProcessor);
        }

        @Override
        @SuppressWarnings("unchecked")
        protected Consumer<K, V> createRawConsumer(Map<String, Object> configProps) {
            try {
                return (Consumer<K, V>) create.invoke(configProps, getKeyDeserializer(), getValueDeserializer());
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Throwable e) {
                throw new IllegalStateException("creating an RDMA Kafka consumer failed", e);
            }
        }
    }
}
