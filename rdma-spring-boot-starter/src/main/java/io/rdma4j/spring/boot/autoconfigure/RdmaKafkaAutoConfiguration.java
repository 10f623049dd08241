package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.spring.boot.kafka.RdmaKafkaConsumerFactoryPostProcessor;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;

/**
 * Spring Kafka consumers over RDMA: with {@code spring.kafka.consumer.properties.rdma.fetch.enabled=true}
 * and rdma4j's Kafka module ({@code io.rdma4j:rdma-kafka-transport}, an optional dependency of this starter) on the
 * class path, every {@code DefaultKafkaConsumerFactory} whose configuration enables RDMA fetch (Boot's
 * auto-configured one included) creates its consumers with {@link RdmaConsumerFactory}. Listeners, post-processors
 * and deserializers configured on the factory are kept. The class condition is read without loading the classes, so
 * an application without Spring Kafka or the Kafka module never loads this configuration's types.
 */
@AutoConfiguration
@ConditionalOnClass({DefaultKafkaConsumerFactory.class, RdmaConsumerFactory.class})
@ConditionalOnProperty(prefix = "rdma4j", name = "enabled", havingValue = "true", matchIfMissing = true)
@ConditionalOnProperty(name = "spring.kafka.consumer.properties." + RdmaKafkaConsumerFactoryPostProcessor.FETCH_ENABLED,
        havingValue = "true")
// Spring Kafka and the Kafka module are optional (requires static): applications with them require them.
@SuppressWarnings("exports")
public class RdmaKafkaAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    public static RdmaKafkaConsumerFactoryPostProcessor rdmaKafkaConsumerFactoryPostProcessor() {
        return new RdmaKafkaConsumerFactoryPostProcessor();
    }
}
