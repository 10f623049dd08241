package io.rdma4j.core.metrics;

/** Sees every finished operation, e.g. to feed a latency histogram. Called on hot paths: keep it cheap. */
@FunctionalInterface
public interface OperationListener {
    void onOperation(OperationType type, long bytes, long nanos, boolean success);
}
