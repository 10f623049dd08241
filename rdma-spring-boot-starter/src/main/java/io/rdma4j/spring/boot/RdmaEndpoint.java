package io.rdma4j.spring.boot;

import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import org.springframework.context.SmartLifecycle;

import java.net.InetSocketAddress;

/**
 * The listening endpoint peers connect to: it answers directory lookups for the regions the
 * {@link RdmaTemplate} publishes, and peers then read those regions one-sided. Started after every
 * singleton (so {@link RdmaRegion} methods have published), stopped before any bean is destroyed:
 * it stops accepting, then closes the lookup connections; regions are deregistered afterwards when
 * the template is destroyed, and the transport closes last.
 */
public class RdmaEndpoint implements SmartLifecycle {

    private static final System.Logger LOG = System.getLogger(RdmaEndpoint.class.getName());

    private final RdmaTransport transport;
    private final RdmaTemplate template;
    private final InetSocketAddress bindAddress;
    private volatile RdmaListener listener;

    public RdmaEndpoint(RdmaTransport transport, RdmaTemplate template, InetSocketAddress bindAddress) {
        this.transport = transport;
        this.template = template;
        this.bindAddress = bindAddress;
    }

    @Override
    public synchronized void start() {
        if (listener != null) {
            return;
        }
        if (transport instanceof UnavailableRdmaTransport unavailable) {
            // fail-fast=false: the application runs without RDMA and health says why.
            LOG.log(System.Logger.Level.WARNING, "rdma4j endpoint not started: " + unavailable.failure().getMessage());
            return;
        }
        listener = transport.listen(bindAddress, template.requestHandlers(), template::accepted);
        LOG.log(System.Logger.Level.INFO, "rdma4j endpoint listening on " + listener.localAddress() + " (" + transport.provider() + ")");
    }

    @Override
    public synchronized void stop() {
        RdmaListener current = listener;
        listener = null;
        if (current != null) {
            current.close();
            template.closeServedConnections();
        }
    }

    @Override
    public boolean isRunning() {
        return listener != null;
    }

    /** The bound address, with the actual port when port 0 was asked for. */
    public InetSocketAddress localAddress() {
        RdmaListener current = listener;
        if (current == null) {
            throw new IllegalStateException("the rdma4j endpoint is not running");
        }
        return current.localAddress();
    }
}
