package io.rdma4j.core.spi;

import java.nio.ByteBuffer;

/** What a provider connection reports to the transport. Called from provider threads: implementations never block. */
public interface ConnectionEvents {

    /** A two-sided message arrived (the buffer is the transport's to keep). */
    void onMessage(ByteBuffer message);

    /**
     * The connection is gone: closed locally, by the peer, or failed. {@code cause} is a
     * {@link io.rdma4j.core.RdmaException} describing why. Called once.
     */
    void onClosed(Throwable cause);
}
