package io.rdma4j.spring.boot;

import io.rdma4j.core.ConnectionPoller;
import io.rdma4j.core.ProviderSelection;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.Access;
import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * Stands in for a transport that failed to open when {@code rdma4j.fail-fast=false}: the application
 * starts, health reports DOWN with the cause, and every operation fails with that cause.
 */
public final class UnavailableRdmaTransport implements RdmaTransport {

    /** Provider name reported while no provider could be opened. */
    public static final String NO_PROVIDER = "none";

    private final TransportConfig config;
    private final RuntimeException failure;
    private final TransportMetrics metrics = new TransportMetrics(NO_PROVIDER);

    public UnavailableRdmaTransport(TransportConfig config, RuntimeException failure) {
        this.config = config;
        this.failure = failure;
    }

    /** Why the transport could not be opened. */
    public RuntimeException failure() {
        return failure;
    }

    private ProviderUnavailableException unavailable() {
        return new ProviderUnavailableException("the rdma4j transport failed to open at startup: " + failure.getMessage(), failure);
    }

    @Override
    public ProviderSelection selection() {
        return new ProviderSelection(NO_PROVIDER, "failed to open: " + failure.getMessage());
    }

    @Override
    public TransportConfig config() {
        return config;
    }

    @Override
    public RegisteredRegion register(MemorySegment segment, Set<Access> access) {
        throw unavailable();
    }

    @Override
    public RegisteredRegion registerFile(Path file, long length, Arena arena) {
        throw unavailable();
    }

    @Override
    public ConnectionPoller openPoller() {
        throw unavailable();
    }

    @Override
    public RdmaListener listen(InetSocketAddress address, RequestHandlers handlers, Consumer<RdmaConnection> onAccept) {
        throw unavailable();
    }

    @Override
    public CompletableFuture<RdmaConnection> connect(InetSocketAddress address) {
        return CompletableFuture.failedFuture(unavailable());
    }

    @Override
    public RegisteredBufferPool createBufferPool(PoolConfig poolConfig) {
        // The pool bean exists while the transport is unavailable; lending a buffer says why it cannot.
        return new RegisteredBufferPool() {
            @Override
            public PoolConfig config() {
                return poolConfig;
            }

            @Override
            public PooledBuffer acquire(long size) {
                throw unavailable();
            }

            @Override
            public long pooledBytes() {
                return 0;
            }

            @Override
            public long outstandingBuffers() {
                return 0;
            }

            @Override
            public long oneOffRegistrations() {
                return 0;
            }

            @Override
            public void close() {
            }
        };
    }

    @Override
    public TransportMetrics metrics() {
        return metrics;
    }

    @Override
    public int registeredRegions() {
        return 0;
    }

    @Override
    public void close() {
        // Nothing was opened.
    }

    @Override
    public String toString() {
        return "UnavailableRdmaTransport[" + failure.getMessage() + "]";
    }
}
