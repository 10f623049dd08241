package io.rdma4j.spring.boot.kafka;

import io.rdma4j.kafka.RdmaConsumerFactory;
import org.apache.kafka.clients.consumer.Consumer;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationContextAware;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;

import java.util.Map;

/**
 * Replaces each {@link DefaultKafkaConsumerFactory} bean whose configuration has
 * {@code rdma.fetch.enabled=true} by one that creates its consumers with
 * {@link RdmaConsumerFactory#create(Map, org.apache.kafka.common.serialization.Deserializer,
 * org.apache.kafka.common.serialization.Deserializer)}.
 */
public class RdmaKafkaConsumerFactoryPostProcessor implements BeanPostProcessor, ApplicationContextAware {

    /** The consumer property that turns RDMA fetch on. */
    public static final String FETCH_ENABLED = "rdma.fetch.enabled";

    private ApplicationContext applicationContext;

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
        RdmaConsumerFactoryAdapter<K, V> adapted = new RdmaConsumerFactoryAdapter<>(original);
        adapted.setBeanName(beanName);
        if (applicationContext != null) {
            adapted.setApplicationContext(applicationContext);
        }
        return adapted;
    }

    /** Keeps the original factory's configuration; only the raw consumer comes from rdma4j. */
    static final class RdmaConsumerFactoryAdapter<K, V> extends DefaultKafkaConsumerFactory<K, V> {

        RdmaConsumerFactoryAdapter(DefaultKafkaConsumerFactory<K, V> original) {
            super(original.getConfigurationProperties(), original::getKeyDeserializer, original::getValueDeserializer);
            original.getListeners().forEach(this::addListener);
            original.getPostProcessors().forEach(this::addPostProcessor);
        }

        @Override
        protected Consumer<K, V> createRawConsumer(Map<String, Object> configProps) {
            return RdmaConsumerFactory.create(configProps, getKeyDeserializer(), getValueDeserializer());
        }
    }
}
