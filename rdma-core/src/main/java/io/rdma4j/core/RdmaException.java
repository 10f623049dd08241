package io.rdma4j.core;

/**
 * Base of every rdma4j failure. Unchecked, because most operations are asynchronous and fail through
 * their {@link java.util.concurrent.CompletableFuture}; the subclasses say what went wrong.
 */
public class RdmaException extends RuntimeException {
    public RdmaException(String message) {
        super(message);
    }

    public RdmaException(String message, Throwable cause) {
        super(message, cause);
    }
}
