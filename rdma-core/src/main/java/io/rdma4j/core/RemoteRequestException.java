package io.rdma4j.core;

/**
 * The peer answered a request ({@link RdmaConnection#request}) with an error reply instead of a body. The
 * connection stays open: the next request may succeed.
 */
public class RemoteRequestException extends RdmaException {

    /** Why the peer did not answer with a body; the wire carries the ordinal plus one (0 is a reply). */
    public enum Status {
        /** No handler for this message type on the peer's listener (or the peer only connected). */
        UNKNOWN_TYPE,
        /** The handler refused the request; the reason says why. */
        REFUSED,
        /** The handler failed; the peer logged the details. */
        HANDLER_FAILED,
        /** The handler's reply exceeded the peer's max-message-size. */
        TOO_LARGE,
        /** This connection already had max-outstanding-operations requests in the peer's handlers. */
        BUSY
    }

    private final Status status;
    private final String reason;

    public RemoteRequestException(Status status, String reason, String message) {
        super(message);
        this.status = status;
        this.reason = reason;
    }

    public Status status() {
        return status;
    }

    /** The peer's reason, as sent. */
    public String reason() {
        return reason;
    }
}
