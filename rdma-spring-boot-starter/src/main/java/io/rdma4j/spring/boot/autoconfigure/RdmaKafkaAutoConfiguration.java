package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.spring.boot.kafka.RdmaKafkaConsumerFactoryPostProcessor;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;

/**
 * Spring Kafka consumers over RDMA: with {@code spring.kafka.consumer.properties.rdma.fetch.enabled=true}
 * and rdma4j's Kafka module on the class path, every {@code DefaultKafkaConsumerFactory} whose
 * configuration enables RDMA fetch (Boot's auto-configured one included) creates its consumers with
 * {@code io.rdma4j.kafka.RdmaConsumerFactory.create(configs, keyDeserializer, valueDeserializer)}.
 * Listeners, post-processors and deserializers configured on the factory are kept.
 */
@AutoConfiguration
@ConditionalOnClass(name = {"org.springframework.kafka.core.DefaultKafkaConsumerFactory",
        RdmaKafkaConsumerFactoryPostProcessor.RDMA_CONSUMER_FACTORY})
@ConditionalOnProperty(prefix = "rdma4j", name = "enabled", havingValue = "true", matchIfMissing = true)
@ConditionalOnProperty(name = "spring.kafka.consumer.properties." + RdmaKafkaConsumerFactoryPostProcessor.FETCH_ENABLED,
        havingValue = "true")
public class RdmaKafkaAutoConfiguration {

    @Bean
    public static RdmaKafkaConsumerFactoryPostProcessor rdmaKafkaConsumerFactoryPostProcessor() {
        return new RdmaKafkaConsumerFactoryPostProcessor(RdmaKafkaConsumerFactoryPostProcessor.RDMA_CONSUMER_FACTORY);
    }
}
