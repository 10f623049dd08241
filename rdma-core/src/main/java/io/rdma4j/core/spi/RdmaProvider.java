package io.rdma4j.core.spi;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;

/**
 * A way to move bytes: {@code verbs} (real RDMA NICs) or {@code tcp} (software emulation). Found with
 * {@link java.util.ServiceLoader}; a provider only implements the raw operations, while the transport
 * around it (in {@code io.rdma4j.core.internal}) adds what must behave the same everywhere: bounds
 * and access pre-checks, local region lookup, back-pressure, timeouts, splitting, metrics.
 */
public interface RdmaProvider {

    /** Short ASCII name of at most 8 bytes, used in config and in region descriptors. */
    String name();

    /** Order for {@code provider=auto}: the usable provider with the highest preference wins. */
    int autoPreference();

    /** Whether this provider can run here with this config, and why (or why not). Cheap, no side effects. */
    Availability probe(TransportConfig config);

    /**
     * Opens the provider; throws {@link io.rdma4j.core.ProviderUnavailableException} with advice when it
     * cannot. {@code metrics} is where the provider counts what only it sees (requests it served or
     * rejected as a responder).
     */
    ProviderTransport open(TransportConfig config, TransportMetrics metrics);
}
