package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.spring.boot.RdmaStatus;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

import java.util.function.Supplier;

/**
 * Boot 4 health: UP on any open provider (details say whether tcp is a fallback and why); UNKNOWN with the
 * error when the transport failed to open and the application runs without it ({@code rdma4j.fail-fast=false});
 * DOWN when the transport is open but the enabled endpoint could not listen.
 */
public class RdmaHealthIndicator implements HealthIndicator {

    private final Supplier<RdmaStatus> status;

    public RdmaHealthIndicator(Supplier<RdmaStatus> status) {
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
