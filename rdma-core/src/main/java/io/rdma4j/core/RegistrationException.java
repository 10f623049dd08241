package io.rdma4j.core;

/** Memory could not be registered (e.g. the locked-memory limit is too low); the message says the fix. */
public class RegistrationException extends RdmaException {
    public RegistrationException(String message) {
        super(message);
    }

    public RegistrationException(String message, Throwable cause) {
        super(message, cause);
    }
}
