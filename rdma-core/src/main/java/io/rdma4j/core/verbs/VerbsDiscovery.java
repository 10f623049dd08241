package io.rdma4j.core.verbs;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.nativeloader.discovery.DiscoveryOptions;

/** The device-selection overrides a {@link TransportConfig} asks for (for the doctor report). */
public final class VerbsDiscovery {

    private VerbsDiscovery() {
    }

    /** @throws IllegalArgumentException when the configured address is not an IP literal */
    public static DiscoveryOptions options(TransportConfig config) {
        return VerbsProvider.options(config);
    }
}
