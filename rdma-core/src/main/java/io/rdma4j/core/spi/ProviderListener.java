package io.rdma4j.core.spi;

import java.net.InetSocketAddress;

/** A provider's listening endpoint. */
public interface ProviderListener extends AutoCloseable {
    InetSocketAddress localAddress();

    @Override
    void close();
}
