package io.rdma4j.core.spi;

import io.rdma4j.core.Access;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;
import java.util.function.Consumer;

/** An opened provider: registration, listening and connecting. Thread-safe. */
public interface ProviderTransport extends AutoCloseable {

    /**
     * Registers native memory. {@code access} is already normalised and validated by the transport
     * (native segment, read-only segments only with remote read).
     */
    ProviderRegion register(MemorySegment segment, Set<Access> access);

    /**
     * Listens; each accepted connection is handed to {@code onConnection} before it delivers events
     * (the transport then calls {@link ProviderConnection#start}).
     */
    ProviderListener listen(InetSocketAddress address, Consumer<ProviderConnection> onConnection);

    /** Connects, blocking for at most {@code timeout}; the transport calls {@link ProviderConnection#start}. */
    ProviderConnection connect(InetSocketAddress address, Duration timeout);

    /**
     * Whether the provider itself authenticates every peer that connects to its listeners, without the transport's
     * shared secret (the tcp provider's mutual TLS). The transport's protected mode counts it as authentication.
     */
    default boolean authenticatesPeers() {
        return false;
    }

    /**
     * Bytes the provider holds for its peers besides the transport's own inbox: responses to their requests not yet
     * written, messages being read. Counted in {@link io.rdma4j.core.metrics.TransportMetrics#bufferedBytes()}.
     */
    default long bufferedBytes() {
        return 0;
    }

    /**
     * A poller through which an event loop's thread reads this provider's connections itself; empty where its
     * connections can only be read by the provider's own threads.
     */
    default Optional<ProviderPoller> openPoller() {
        return Optional.empty();
    }

    /** Largest length of one read or write; the transport splits longer ones. */
    long maxOperationLength();

    /** Releases everything the provider holds. Called after all connections, listeners and regions are closed. */
    @Override
    void close();
}
