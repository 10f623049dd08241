package io.rdma4j.core.spi;

/**
 * The outcome of {@link RdmaProvider#probe}: usable or not, a short summary for the one log line that names the
 * provider (e.g. {@code no RDMA device found}), and the full reason with advice a user can act on (for the doctor
 * and DEBUG logs).
 */
public record Availability(boolean usable, String summary, String reason) {

    /** Usable; the reason is short enough to be its own summary. */
    public static Availability usable(String reason) {
        return new Availability(true, reason, reason);
    }

    public static Availability usable(String summary, String reason) {
        return new Availability(true, summary, reason);
    }

    /** Unusable; the reason is short enough to be its own summary. */
    public static Availability unusable(String reason) {
        return new Availability(false, reason, reason);
    }

    public static Availability unusable(String summary, String reason) {
        return new Availability(false, summary, reason);
    }
}
