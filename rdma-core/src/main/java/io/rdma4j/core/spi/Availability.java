package io.rdma4j.core.spi;

/** The outcome of {@link RdmaProvider#probe}: usable or not, and a reason a user can act on. */
public record Availability(boolean usable, String reason) {
    public static Availability usable(String reason) {
        return new Availability(true, reason);
    }

    public static Availability unusable(String reason) {
        return new Availability(false, reason);
    }
}
