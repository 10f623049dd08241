package io.rdma4j.core;

import java.net.InetSocketAddress;

/**
 * A listening endpoint. Peers that connect can read and write this transport's regions one-sided
 * whether or not the application looks at the connection; the accept handler given to
 * {@link RdmaTransport#listen} receives each connection for two-sided messaging.
 */
public interface RdmaListener extends AutoCloseable {

    /** The bound address (with the actual port when 0 was asked for). */
    InetSocketAddress localAddress();

    /** Stops accepting. Connections already accepted stay open until closed or the transport closes. */
    @Override
    void close();
}
