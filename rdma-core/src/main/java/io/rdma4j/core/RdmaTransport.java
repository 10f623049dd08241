package io.rdma4j.core;

import io.rdma4j.core.metrics.TransportMetrics;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.RegisteredBufferPool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The entry point: one transport per process (or per framework component) on one provider. Open it,
 * register memory, listen and connect, and close it when done.
 *
 * <pre>{@code
 * try (RdmaTransport transport = RdmaTransport.open(TransportConfig.defaults())) {
 *     System.out.println("running on " + transport.selection());
 *     RegisteredRegion region = transport.register(segment, Access.remoteRead());
 *     ...
 * }
 * }</pre>
 */
public interface RdmaTransport extends AutoCloseable {

    /**
     * Opens a transport on the provider the config asks for: {@code auto} takes verbs when a usable
     * RDMA device exists and tcp otherwise; a named provider that cannot run here fails with
     * {@link ProviderUnavailableException} saying why and what to do.
     */
    static RdmaTransport open(TransportConfig config) {
        return TransportFactoryLoader.factory().open(config);
    }

    /**
     * What {@link #open(TransportConfig)} would choose here and why, without opening anything (what the
     * doctor prints). Fails with {@link ProviderUnavailableException} when nothing could run.
     */
    static ProviderSelection explain(TransportConfig config) {
        return TransportFactoryLoader.factory().explain(config);
    }

    /** The chosen provider and why. */
    ProviderSelection selection();

    /** The chosen provider's name, e.g. {@code verbs} or {@code tcp}. */
    default String provider() {
        return selection().provider();
    }

    TransportConfig config();

    /**
     * Registers native memory (from an {@link java.lang.foreign.Arena} or a mapped file). The memory must
     * stay alive until the region is closed. A read-only segment (a file mapped read-only) can only be
     * registered for {@link Access#REMOTE_READ}. The transport's threads access it, so a segment of
     * {@code Arena.ofConfined()} is refused ({@link IllegalArgumentException}); use {@code Arena.ofShared()},
     * {@code Arena.ofAuto()} or {@code Arena.global()}.
     */
    RegisteredRegion register(MemorySegment segment, Set<Access> access);

    /**
     * Maps the first {@code length} bytes of a file into {@code arena} and registers them for
     * {@link Access#REMOTE_READ}, so peers read the file's page cache one-sided (the region's
     * {@link RegisteredRegion#segment()} is the mapping). Nothing writes through the mapping. Linux kernels
     * before 6.2 pin every region for writing and refuse read-only file mappings (verbs: EFAULT); the
     * transport then maps the file shared and writable instead (the same page cache, zero-copy; needs write
     * permission on the file, or fails with {@link RegistrationException} saying so) and keeps doing so for
     * later files. Close the region before the arena, which must not be confined (see {@link #register}).
     */
    RegisteredRegion registerFile(Path file, long length, Arena arena);

    /**
     * A poller for an event loop's thread, which then reads its connections itself; see {@link ConnectionPoller}.
     * Close it before the transport.
     */
    ConnectionPoller openPoller();

    /**
     * Listens on {@code address} (port 0 picks a free one); peers may connect and access regions, and their
     * requests ({@link RdmaConnection#request}) are answered by {@code handlers}. {@code onAccept} receives each
     * connection for two-sided messaging.
     */
    RdmaListener listen(InetSocketAddress address, RequestHandlers handlers, Consumer<RdmaConnection> onAccept);

    /** Listens without request handlers; see {@link #listen(InetSocketAddress, RequestHandlers, Consumer)}. */
    default RdmaListener listen(InetSocketAddress address, Consumer<RdmaConnection> onAccept) {
        return listen(address, RequestHandlers.none(), onAccept);
    }

    /** Listens and answers requests with {@code handlers}; the connections need no other attention. */
    default RdmaListener listen(InetSocketAddress address, RequestHandlers handlers) {
        return listen(address, handlers, connection -> { });
    }

    /** Listens without an accept handler: peers can still read/write regions one-sided. */
    default RdmaListener listen(InetSocketAddress address) {
        return listen(address, connection -> { });
    }

    /** Connects to a peer's listener; fails with {@link RdmaTimeoutException} after the connect timeout. */
    CompletableFuture<RdmaConnection> connect(InetSocketAddress address);

    /** A pool of registered buffers owned by this transport (closed with it). */
    RegisteredBufferPool createBufferPool(PoolConfig config);

    /** Counts, bytes and latency of this transport's operations. */
    TransportMetrics metrics();

    /** Regions currently registered. */
    int registeredRegions();

    /** Stops listeners, closes connections (failing pending operations), deregisters regions, closes the provider. */
    @Override
    void close();
}
