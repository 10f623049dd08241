package io.rdma4j.core;

/** The peer did not prove knowledge of the configured shared secret, or demanded one we do not have. */
public class AuthenticationException extends RdmaException {
    public AuthenticationException(String message) {
        super(message);
    }
}
