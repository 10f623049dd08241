package io.rdma4j.spark;

/** A peer executor cannot be reached by RDMA (no rdma4j endpoint, or connecting failed); says why. */
final class PeerUnreachableException extends Exception {
    private final String executorId;

    PeerUnreachableException(String executorId, String message, Throwable cause) {
        super(message, cause);
        this.executorId = executorId;
    }

    String executorId() {
        return executorId;
    }
}
