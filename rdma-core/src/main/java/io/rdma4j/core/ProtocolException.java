package io.rdma4j.core;

/** A peer sent bytes that break the wire protocol: malformed, truncated or oversized frames, unknown version. */
public class ProtocolException extends RdmaException {
    public ProtocolException(String message) {
        super(message);
    }
}
