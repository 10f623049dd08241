package io.rdma4j.core;

/**
 * The requested provider cannot run here: no device, a native library missing, memlock too low. The
 * message says what to do about it.
 */
public class ProviderUnavailableException extends RdmaException {
    public ProviderUnavailableException(String message) {
        super(message);
    }

    public ProviderUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
