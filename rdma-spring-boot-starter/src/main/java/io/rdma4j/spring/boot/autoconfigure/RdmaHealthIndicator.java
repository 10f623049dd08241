package io.rdma4j.spring.boot.autoconfigure;

import io.rdma4j.spring.boot.RdmaStatus;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

import java.util.function.Supplier;

/**
 * Boot 4 health: UP on any open provider (details say whether tcp is a fallback and why); UNKNOWN with the
 * error when the transport failed to open and the application runs without it ({@code rdma4j.fail-fast=false});
 * DOWN when the transport is open but the enabled endpoint could not listen. The mapping is
 * {@link RdmaStatus.State#healthStatus()}'s, shared with {@link Boot3RdmaHealthIndicator}.
 */
// spring-boot-health is optional (requires static): applications with it require it themselves.
@SuppressWarnings("exports")
public record RdmaHealthIndicator(Supplier<RdmaStatus> status) implements HealthIndicator {

    @Override
    public Health health() {
        RdmaStatus s = status.get();
        return Health.status(s.state().healthStatus()).withDetails(s.details()).build();
    }
}
