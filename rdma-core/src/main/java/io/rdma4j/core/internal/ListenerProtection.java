package io.rdma4j.core.internal;

import io.rdma4j.core.ProtectedModeException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.spi.ProviderTransport;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Protected mode, as Redis has it: a listener that other hosts can reach serves only peers that prove who they are
 * (the shared secret, or the provider's mutual TLS), unless the user says otherwise with
 * {@code allow-unauthenticated=true}. A loopback listener serves this host alone, whose processes could read the
 * memory anyway, so it needs neither. A wildcard address counts as reachable from other hosts.
 */
final class ListenerProtection {

    private static final System.Logger LOG = System.getLogger(io.rdma4j.core.RdmaTransport.class.getName());

    private final TransportConfig config;
    private final ProviderTransport provider;
    private final String providerName;
    private final AtomicBoolean warned = new AtomicBoolean();

    ListenerProtection(TransportConfig config, ProviderTransport provider, String providerName) {
        this.config = config;
        this.provider = provider;
        this.providerName = providerName;
    }

    /**
     * Lets a listener on {@code address} open, or refuses it.
     *
     * @return whether it will serve unauthenticated peers of other hosts, as the user allowed
     * @throws ProtectedModeException when the listener would serve unauthenticated peers of other hosts and the user
     *                                did not allow it
     */
    boolean check(InetSocketAddress address) {
        if (isLoopback(address) || config.sharedSecretValue().isPresent() || provider.authenticatesPeers()) {
            return false;
        }
        if (!config.allowUnauthenticated()) {
            throw new ProtectedModeException("rdma4j will not listen on " + describe(address) + " without authenticating "
                    + "peers: any host that reaches it could read every region published there. Set shared-secret "
                    + "(16 bytes or more, the same on every peer)" + (providerName.equals("tcp")
                    ? " or tcp.tls=true with client certificates" : "")
                    + ", or allow-unauthenticated=true to serve any peer; a loopback address needs neither"
                    + " (keys under your integration's prefix, e.g. rdma4j.shared-secret, spark.shuffle.rdma.sharedSecret,"
                    + " rdma.shared-secret)");
        }
        return true;
    }

    /** The one WARN line per transport for a listener that {@link #check} let serve unauthenticated peers. */
    void listening(InetSocketAddress address) {
        if (warned.compareAndSet(false, true)) {
            LOG.log(System.Logger.Level.WARNING, "rdma4j serves unauthenticated peers on " + describe(address)
                    + " (allow-unauthenticated=true): any host that reaches it can read the regions published there; set"
                    + " shared-secret" + (providerName.equals("tcp") ? " or tcp.tls=true" : "") + " to authenticate peers");
        }
    }

    static boolean isLoopback(InetSocketAddress address) {
        InetAddress ip = address.getAddress();
        return ip != null && ip.isLoopbackAddress();
    }

    private static String describe(InetSocketAddress address) {
        InetAddress ip = address.getAddress();
        String host = ip == null ? address.getHostString() : ip.getHostAddress();
        return host + ":" + address.getPort() + (ip != null && ip.isAnyLocalAddress() ? " (every interface)" : "");
    }
}
