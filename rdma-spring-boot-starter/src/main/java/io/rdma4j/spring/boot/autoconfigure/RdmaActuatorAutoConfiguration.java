package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.metrics.MicrometerMetrics;
import io.rdma4j.spring.boot.RdmaEndpoint;
import io.rdma4j.spring.boot.RdmaStatus;
import io.rdma4j.spring.boot.RdmaTemplate;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.info.ConditionalOnEnabledInfoContributor;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Health, info and metrics of the transport when the actuator (or Micrometer) is present. The health
 * indicator exists once per Boot line: Boot 4 moved the API to
 * {@code org.springframework.boot.health.contributor}, Boot 3 has it in
 * {@code org.springframework.boot.actuate.health}; each is guarded by its own class condition.
 * Each follows Boot's switches: {@code management.health.rdma4j.enabled} /
 * {@code management.info.rdma4j.enabled}, falling back to {@code management.health.defaults.enabled} /
 * {@code management.info.defaults.enabled}. The enabled-conditions are Boot's own annotations, one per
 * line where their package differs; an annotation whose class is absent on the running line is ignored
 * by Spring, and the class condition keeps that line's other configuration out.
 */
@AutoConfiguration(after = RdmaAutoConfiguration.class)
@ConditionalOnBean(RdmaTransport.class)
public class RdmaActuatorAutoConfiguration {

    /** Name of the health and info contributors: /actuator/health/rdma4j, the info section rdma4j. */
    public static final String HEALTH_CONTRIBUTOR = "rdma4j";

    /** Bean name; the health contributor is therefore called {@value #HEALTH_CONTRIBUTOR}. */
    public static final String HEALTH_INDICATOR_BEAN = "rdma4jHealthIndicator";

    static RdmaStatus status(RdmaTransport transport, ObjectProvider<RdmaEndpoint> endpoint, ObjectProvider<RdmaTemplate> template) {
        return RdmaStatus.of(transport, endpoint.getIfAvailable(), template.getIfAvailable());
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
    @org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator(HEALTH_CONTRIBUTOR)
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
    @org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator(HEALTH_CONTRIBUTOR)
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
    @ConditionalOnEnabledInfoContributor(HEALTH_CONTRIBUTOR)
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
