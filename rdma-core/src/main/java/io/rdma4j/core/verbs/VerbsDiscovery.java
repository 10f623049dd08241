package io.rdma4j.core.verbs;

import io.rdma4j.core.TransportConfig;
import io.rdma4j.nativeloader.discovery.DiscoveryOptions;
import io.rdma4j.nativeloader.discovery.DiscoveryReport;

/**
 * What the doctor report needs from the verbs provider: the device-selection overrides a {@link TransportConfig} asks
 * for, and the advice the provider's reasons carry (the report prints it once, under "advice:").
 */
public final class VerbsDiscovery {

    private VerbsDiscovery() {
    }

    /** @throws IllegalArgumentException when the configured address is not an IP literal */
    public static DiscoveryOptions options(TransportConfig config) {
        return VerbsProvider.options(config);
    }

    /** The advice as the provider appends it to why verbs is unusable, e.g. {@code " (advice: ...)"}; empty if none. */
    public static String advice(DiscoveryReport report) {
        return report.advice().isEmpty() ? "" : " (advice: " + String.join("; ", report.advice()) + ")";
    }
}
