package io.rdma4j.core;

/**
 * Which provider a transport runs on and why, e.g. {@code tcp: "auto: verbs unusable (no RDMA devices
 * found: /sys/class/infiniband is empty)"}.
 */
public record ProviderSelection(String provider, String reason) {
    @Override
    public String toString() {
        return provider + " (" + reason + ")";
    }
}
