package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.spring.boot.RdmaStatus;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;

import java.util.function.Supplier;

/** Boot 3.5 health: {@link RdmaHealthIndicator}'s report on the older health API (its own package on that line). */
// The actuator is optional (requires static): applications with it require it themselves.
@SuppressWarnings("exports")
public record Boot3RdmaHealthIndicator(Supplier<RdmaStatus> status) implements HealthIndicator {

    @Override
    public Health health() {
        RdmaStatus s = status.get();
        return Health.status(s.state().healthStatus()).withDetails(s.details()).build();
    }
}
