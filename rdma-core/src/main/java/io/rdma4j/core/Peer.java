package io.rdma4j.core;

import java.net.InetSocketAddress;
import java.util.Objects;
import java.util.Optional;

/**
 * The other end of a connection, as a {@link RequestHandler} sees it.
 *
 * @param address   the peer's address as the provider reports it
 * @param provider  the provider the connection runs on
 * @param principal the identity the peer proved when connecting: on tcp with {@code tcp.tls=true} and
 *                  certificate authentication, the subject of its verified certificate (e.g.
 *                  {@code CN=reducer-1,O=example}); empty when nothing names the peer (no TLS, a connecting side
 *                  without a certificate, or a shared secret alone, which proves membership, not who)
 */
public record Peer(InetSocketAddress address, String provider, Optional<String> principal) {
    public Peer {
        Objects.requireNonNull(address, "address");
        Objects.requireNonNull(provider, "provider");
        Objects.requireNonNull(principal, "principal");
    }
}
