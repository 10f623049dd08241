package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.spring.boot.RdmaStatus;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;

import java.util.function.Supplier;

/** Boot 3.5 health; the same report as {@link RdmaHealthIndicator} on the older health API. */
public class Boot3RdmaHealthIndicator implements HealthIndicator {

    private final Supplier<RdmaStatus> status;

    public Boot3RdmaHealthIndicator(Supplier<RdmaStatus> status) {
        this.status = status;
    }

    @Override
    public Health health() {
        RdmaStatus s = status.get();
        Health.Builder builder = switch (s.state()) {
            case UP -> Health.up();
            case WITHOUT_RDMA -> Health.unknown();
            case DOWN -> Health.down();
        };
        return builder.withDetails(s.details()).build();
    }
}
