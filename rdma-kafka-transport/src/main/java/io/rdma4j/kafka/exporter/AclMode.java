package io.rdma4j.kafka.exporter;

import java.util.Locale;

/**
 * {@code rdma.exporter.acls}: whether the exporter serves a topic only to consumers whose Kafka principal may READ it.
 * {@link #AUTO}, the default, asks the cluster whether it has an authorizer and checks when it does: an exporter must
 * not serve more than the brokers next to it would.
 */
public enum AclMode {
    /** Checks when the cluster has an authorizer ({@code describeAcls} answers anything but SecurityDisabledException). */
    AUTO,
    /** Checks. */
    ON,
    /** Serves every exported topic to any peer the rdma4j transport admits; logs a WARN line on a cluster with an authorizer. */
    OFF;

    /** {@code auto}, {@code true} or {@code false}; the message says which. */
    static AclMode parse(String key, String value) {
        return switch (value.trim().toLowerCase(Locale.ROOT)) {
            case "auto" -> AUTO;
            case "true" -> ON;
            case "false" -> OFF;
            default -> throw new IllegalArgumentException(key + " must be auto, true or false, got '" + value + "'");
        };
    }
}
