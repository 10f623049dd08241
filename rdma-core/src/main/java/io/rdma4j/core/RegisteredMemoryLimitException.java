package io.rdma4j.core;

/**
 * Registering would take the process past its limit on registered memory: {@code RLIMIT_MEMLOCK} on the verbs
 * provider, {@code tcp.max-registered-bytes} on the tcp provider. Registrations that end (regions closed) make room
 * again; the message says which limit to raise.
 */
public class RegisteredMemoryLimitException extends RegistrationException {
    public RegisteredMemoryLimitException(String message) {
        super(message);
    }
}
