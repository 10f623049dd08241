package io.rdma4j.core;

/** The connection was closed, locally or by the peer (including the peer dying), before the operation finished. */
public class ConnectionClosedException extends RdmaException {
    public ConnectionClosedException(String message) {
        super(message);
    }

    public ConnectionClosedException(String message, Throwable cause) {
        super(message, cause);
    }
}
