package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.spring.boot.RdmaStatus;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

import java.util.function.Supplier;

/** Boot 4 health: UP on any open provider (details say whether tcp is a fallback and why), DOWN when it failed to open. */
public class RdmaHealthIndicator implements HealthIndicator {

    private final Supplier<RdmaStatus> status;

    public RdmaHealthIndicator(Supplier<RdmaStatus> status) {
        this.status = status;
    }

    @Override
    public Health health() {
        RdmaStatus s = status.get();
        Health.Builder builder = s.up() ? Health.up() : Health.down();
        return builder.withDetails(s.details()).build();
    }
}
