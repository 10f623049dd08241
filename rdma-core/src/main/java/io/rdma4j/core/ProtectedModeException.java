package io.rdma4j.core;

/**
 * A listener would serve unauthenticated peers beyond this host: its address is not a loopback address and the
 * transport has neither a {@code shared-secret} nor mutual TLS. Any peer that reaches the port could then read
 * every region published to it. The message names the ways out: a shared secret, {@code tcp.tls=true} with client
 * certificates, or {@code allow-unauthenticated=true}.
 */
public class ProtectedModeException extends RdmaException {
    public ProtectedModeException(String message) {
        super(message);
    }
}
