package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.metrics.MicrometerMetrics;
import io.rdma4j.spring.boot.RdmaEndpoint;
import io.rdma4j.spring.boot.RdmaStatus;
import io.rdma4j.spring.boot.RdmaTemplate;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Health, info and metrics of the transport when the actuator (or Micrometer) is present. The health
 * indicator exists once per Boot line: Boot 4 moved the API to
 * {@code org.springframework.boot.health.contributor}, Boot 3 has it in
 * {@code org.springframework.boot.actuate.health}; each is guarded by its own class condition.
 * Disable one part with {@code management.health.rdma4j.enabled=false} or
 * {@code management.info.rdma4j.enabled=false}.
 */
@AutoConfiguration(after = RdmaAutoConfiguration.class)
@ConditionalOnBean(RdmaTransport.class)
public class RdmaActuatorAutoConfiguration {

    /** Bean name; the health contributor is therefore called {@code rdma4j} (/actuator/health/rdma4j). */
    public static final String HEALTH_INDICATOR_BEAN = "rdma4jHealthIndicator";

    static RdmaStatus status(RdmaTransport transport, ObjectProvider<RdmaEndpoint> endpoint, ObjectProvider<RdmaTemplate> template) {
        return RdmaStatus.of(transport, endpoint.getIfAvailable(), template.getIfAvailable());
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
    @ConditionalOnProperty(prefix = "management.health.rdma4j", name = "enabled", havingValue = "true", matchIfMissing = true)
    static class Boot4Health {
        @Bean(HEALTH_INDICATOR_BEAN)
        @ConditionalOnMissingBean(name = HEALTH_INDICATOR_BEAN)
        RdmaHealthIndicator rdma4jHealthIndicator(RdmaTransport transport, ObjectProvider<RdmaEndpoint> endpoint,
                                                  ObjectProvider<RdmaTemplate> template) {
            return new RdmaHealthIndicator(() -> status(transport, endpoint, template));
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
    @ConditionalOnProperty(prefix = "management.health.rdma4j", name = "enabled", havingValue = "true", matchIfMissing = true)
    static class Boot3Health {
        @Bean(HEALTH_INDICATOR_BEAN)
        @ConditionalOnMissingBean(name = HEALTH_INDICATOR_BEAN)
        Boot3RdmaHealthIndicator rdma4jHealthIndicator(RdmaTransport transport, ObjectProvider<RdmaEndpoint> endpoint,
                                                       ObjectProvider<RdmaTemplate> template) {
            return new Boot3RdmaHealthIndicator(() -> status(transport, endpoint, template));
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.info.InfoContributor")
    @ConditionalOnProperty(prefix = "management.info.rdma4j", name = "enabled", havingValue = "true", matchIfMissing = true)
    static class Info {
        @Bean
        @ConditionalOnMissingBean
        RdmaInfoContributor rdma4jInfoContributor(RdmaTransport transport, ObjectProvider<RdmaEndpoint> endpoint,
                                                  ObjectProvider<RdmaTemplate> template) {
            return new RdmaInfoContributor(() -> status(transport, endpoint, template));
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.micrometer.core.instrument.binder.MeterBinder")
    static class Metrics {
        /** Boot binds every MeterBinder bean to the application's registries: rdma4j.operations etc. */
        @Bean
        @ConditionalOnMissingBean
        MicrometerMetrics rdma4jMeterBinder(RdmaTransport transport) {
            return new MicrometerMetrics(transport.metrics());
        }
    }
}
