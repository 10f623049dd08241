package io.rdma4j.spring.boot;

import io.rdma4j.spring.boot.autoconfigure.Boot3RdmaHealthIndicator;
import io.rdma4j.spring.boot.autoconfigure.RdmaActuatorAutoConfiguration;
import io.rdma4j.spring.boot.autoconfigure.RdmaHealthIndicator;
import org.springframework.context.ApplicationContext;
import org.springframework.util.ClassUtils;

import java.util.Map;

/**
 * The rdma4j health indicator's status and details on whichever Boot line the suite runs: each line's
 * health types are touched only in its own nested class, so the other line's absent classes are never loaded.
 */
record HealthOnEitherLine(String status, Map<String, Object> details) {

    static HealthOnEitherLine of(ApplicationContext context) {
        Object indicator = context.getBean(RdmaActuatorAutoConfiguration.HEALTH_INDICATOR_BEAN);
        return ClassUtils.isPresent("org.springframework.boot.health.contributor.Health", HealthOnEitherLine.class.getClassLoader())
                ? Boot4.of(indicator) : Boot3.of(indicator);
    }

    private static final class Boot4 {
        static HealthOnEitherLine of(Object indicator) {
            var health = ((RdmaHealthIndicator) indicator).health();
            return new HealthOnEitherLine(health.getStatus().getCode(), health.getDetails());
        }
    }

    private static final class Boot3 {
        static HealthOnEitherLine of(Object indicator) {
            var health = ((Boot3RdmaHealthIndicator) indicator).health();
            return new HealthOnEitherLine(health.getStatus().getCode(), health.getDetails());
        }
    }
}
