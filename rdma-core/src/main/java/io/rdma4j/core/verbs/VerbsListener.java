package io.rdma4j.core.verbs;

import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderListener;
import io.rdma4j.nativeloader.RdmaCm;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/** A listening cm id: each connect request is accepted on the CM thread and handed over once ESTABLISHED. */
final class VerbsListener implements ProviderListener {

    private static final System.Logger LOG = System.getLogger(VerbsListener.class.getName());

    private final VerbsTransport transport;
    private final MemorySegment id;
    private final InetSocketAddress local;
    private final Consumer<ProviderConnection> onConnection;
    private final AtomicBoolean closed = new AtomicBoolean();

    VerbsListener(VerbsTransport transport, MemorySegment id, InetSocketAddress local,
                  Consumer<ProviderConnection> onConnection) {
        this.transport = transport;
        this.id = id;
        this.local = local;
        this.onConnection = onConnection;
    }

    MemorySegment id() {
        return id;
    }

    /**
     * On the CM thread: set up the connection and accept; it is handed over once ESTABLISHED, with a shared secret
     * only once the peer proved it (on the progress thread).
     */
    void onConnectRequest(RdmaCm.Event e) {
        MemorySegment newId = e.idHandle();
        if (closed.get() || !transport.isOpen()) {
            RdmaCm.reject(newId);
            RdmaCm.destroyId(newId);
            return;
        }
        VerbsConnection c = new VerbsConnection(transport, newId, false);
        transport.settingUp(c);
        transport.cmEvents.on(newId, c::onCmEvent);
        try {
            c.accept(e, () -> {
                transport.settingUpEnded(c);
                transport.progress.attach(c);
            }, () -> onConnection.accept(c));
        } catch (RuntimeException ex) {
            LOG.log(System.Logger.Level.WARNING, "rejecting connection request: " + ex.getMessage());
            RdmaCm.reject(newId);
            transport.settingUpEnded(c);
            c.destroyUnattached();
        }
    }

    @Override
    public InetSocketAddress localAddress() {
        return local;
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            transport.listenerClosed(this);
            transport.cmEvents.forget(id);
            RdmaCm.destroyId(id);
        }
    }
}
