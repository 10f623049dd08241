package io.rdma4j.core.metrics;

import java.util.Locale;

/** The operations a transport counts. */
public enum OperationType {
    READ, WRITE, SEND, RECEIVE;

    /** Lower-case name for meter tags. */
    public String tagValue() {
        return name().toLowerCase(Locale.ROOT);
    }
}
