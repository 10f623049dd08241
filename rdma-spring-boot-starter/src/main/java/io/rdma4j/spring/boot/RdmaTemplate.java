package io.rdma4j.spring.boot;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Named regions for applications: {@code publish} memory, a direct buffer or a file under a name, and
 * {@code read} a peer's named region into local memory or a file. A peer finds a name through a small
 * directory protocol ({@link DirectoryProtocol}) on the connection to the publisher's
 * {@link RdmaEndpoint}; the bytes then move one-sided, without the publisher's threads.
 *
 * <p>Thread-safe. Connections to peers are opened on first use and kept until {@link #close()}.
 */
public final class RdmaTemplate implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(RdmaTemplate.class.getName());

    /** Never started: only asks whether memory is usable from a thread other than its owner's. */
    private static final Thread OTHER_THREAD = Thread.ofVirtual().unstarted(() -> { });

    private final RdmaTransport transport;
    private final Map<String, PublishedRegion> published = new ConcurrentHashMap<>();
    private final Map<InetSocketAddress, DirectoryClient> clients = new ConcurrentHashMap<>();
    private final Set<RdmaConnection> served = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean closed = new AtomicBoolean();

    public RdmaTemplate(RdmaTransport transport) {
        this.transport = transport;
    }

    public RdmaTransport transport() {
        return transport;
    }

    // ---------------------------------------------------------------- publishing

    /**
     * Publishes native memory the caller keeps alive until the region is closed (or the template
     * closes). Peers may only read it.
     *
     * @throws IllegalStateException if the name is taken
     */
    public PublishedRegion publish(String name, MemorySegment segment) {
        return publish(name, segment, null);
    }

    /** Publishes a direct buffer's remaining bytes; heap buffers are refused (the garbage collector moves them). */
    public PublishedRegion publish(String name, ByteBuffer buffer) {
        if (!buffer.isDirect()) {
            throw new IllegalArgumentException("region '" + name + "': only a direct ByteBuffer can be published "
                    + "(use ByteBuffer.allocateDirect or a MemorySegment from an Arena)");
        }
        return publish(name, MemorySegment.ofBuffer(buffer), null);
    }

    /** Maps the file read-only and publishes it; the mapping is released when the region is closed. */
    public PublishedRegion publish(String name, Path file) {
        Arena arena = Arena.ofShared();
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = channel.size();
            if (size == 0) {
                throw new IllegalArgumentException("region '" + name + "': file " + file + " is empty; there is nothing to publish");
            }
            return publish(name, channel.map(FileChannel.MapMode.READ_ONLY, 0, size, arena), arena);
        } catch (IOException e) {
            arena.close();
            throw new UncheckedIOException("region '" + name + "': cannot map " + file, e);
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
    }

    private PublishedRegion publish(String name, MemorySegment segment, Arena ownedMemory) {
        DirectoryProtocol.nameBytes(name);
        checkOpen();
        if (segment.byteSize() == 0) {
            throw new IllegalArgumentException("region '" + name + "' is empty; there is nothing to publish");
        }
        requireShared(segment, "region '" + name + "'");
        // Reserve the name first so two publishers of one name cannot both register memory.
        PublishedRegion[] holder = new PublishedRegion[1];
        PublishedRegion existing = published.putIfAbsent(name, placeholder(name));
        if (existing != null) {
            throw new IllegalStateException("a region named '" + name + "' is already published; close it first or choose another name");
        }
        try {
            RegisteredRegion region = transport.register(segment, EnumSet.of(Access.REMOTE_READ));
            holder[0] = new PublishedRegion(name, region, ownedMemory, () -> published.remove(name, holder[0]));
            published.put(name, holder[0]);
            LOG.log(System.Logger.Level.DEBUG, "published " + holder[0]);
            return holder[0];
        } catch (RuntimeException | Error e) {
            published.remove(name);
            throw e;
        }
    }

    private static PublishedRegion placeholder(String name) {
        return new PublishedRegion(name, null, null, () -> { });
    }

    /** Withdraws and deregisters the named region; false if none was published under that name. */
    public boolean unpublish(String name) {
        PublishedRegion region = published.get(name);
        if (region == null || !isReady(region)) {
            return false;
        }
        region.close();
        return true;
    }

    /** The region published under {@code name}, if any. */
    public Optional<PublishedRegion> published(String name) {
        return Optional.ofNullable(published.get(name)).filter(RdmaTemplate::isReady);
    }

    /** Names of the regions published here, sorted. */
    public Set<String> publishedNames() {
        Set<String> names = new TreeSet<>();
        published.forEach((name, region) -> {
            if (isReady(region)) {
                names.add(name);
            }
        });
        return names;
    }

    private static boolean isReady(PublishedRegion region) {
        return region.hasRegion();
    }

    // ---------------------------------------------------------------- serving (the endpoint's side)

    /** Answers directory lookups on an accepted connection until it closes. Runs on its own (virtual) thread. */
    void serve(RdmaConnection connection) {
        served.add(connection);
        try {
            while (connection.isOpen() && !closed.get()) {
                ByteBuffer request = connection.receive().join();
                connection.send(answer(request)).join();
            }
        } catch (RuntimeException e) {
            // The peer went away or the endpoint is stopping: nothing to answer any more.
            LOG.log(System.Logger.Level.DEBUG, "directory connection " + connection.remoteAddress() + " ended: " + e);
        } finally {
            served.remove(connection);
            connection.close();
        }
    }

    private ByteBuffer answer(ByteBuffer request) {
        DirectoryProtocol.Message message;
        try {
            message = DirectoryProtocol.parse(request);
        } catch (ProtocolException e) {
            return DirectoryProtocol.text(DirectoryProtocol.ERROR, 0, e.getMessage());
        }
        if (message.type() != DirectoryProtocol.LOOKUP) {
            return DirectoryProtocol.text(DirectoryProtocol.ERROR, message.correlationId(),
                    "unknown rdma4j directory request type " + message.type());
        }
        String name;
        try {
            name = DirectoryProtocol.readText(message.body());
        } catch (ProtocolException e) {
            return DirectoryProtocol.text(DirectoryProtocol.ERROR, message.correlationId(), e.getMessage());
        }
        Optional<PublishedRegion> region = published(name);
        if (region.isEmpty()) {
            return DirectoryProtocol.text(DirectoryProtocol.NOT_FOUND, message.correlationId(),
                    "no region named '" + name + "' is published here; published: " + publishedNames());
        }
        return DirectoryProtocol.found(message.correlationId(), region.get().descriptor());
    }

    /** Closes the connections peers opened to look up regions (their pending requests fail). */
    void closeServedConnections() {
        served.forEach(RdmaConnection::close);
        served.clear();
    }

    // ---------------------------------------------------------------- reading (the client's side)

    /** The descriptor of the region {@code peer} published under {@code name}. */
    public RegionDescriptor lookup(InetSocketAddress peer, String name) {
        return await(client(peer).lookup(name), "looking up region '" + name + "' at " + peer);
    }

    /**
     * Reads the whole region {@code peer} published under {@code name} into the start of {@code sink}
     * (native memory at least as large as the region), registering it for the duration of the read.
     *
     * @return the number of bytes read (the region's size)
     */
    @SuppressWarnings("try") // the registration is only held open, so the NIC may write into the sink until the read ends
    public long read(InetSocketAddress peer, String name, MemorySegment sink) {
        RegionDescriptor remote = lookup(peer, name);
        if (sink.byteSize() < remote.length()) {
            throw new IllegalArgumentException("region '" + name + "' at " + peer + " has " + remote.length()
                    + " bytes but the sink holds only " + sink.byteSize());
        }
        if (sink.isReadOnly()) {
            throw new IllegalArgumentException("the sink of a read must be writable");
        }
        requireShared(sink, "the sink of a read");
        MemorySegment target = sink.asSlice(0, remote.length());
        try (RegisteredRegion registered = transport.register(target, EnumSet.of(Access.LOCAL_WRITE))) {
            DirectoryClient client = client(peer);
            await(client.connection.read(remote, 0, target), "reading region '" + name + "' from " + peer);
            return remote.length();
        }
    }

    /** Reads the region into new memory of {@code arena} (a shared, auto or global arena). */
    public MemorySegment read(InetSocketAddress peer, String name, Arena arena) {
        RegionDescriptor remote = lookup(peer, name);
        MemorySegment sink = arena.allocate(remote.length(), 64);
        read(peer, name, sink);
        return sink;
    }

    /** Reads the region into {@code target} (created or replaced, written through a mapping, then forced to disk). */
    public long readToFile(InetSocketAddress peer, String name, Path target) {
        RegionDescriptor remote = lookup(peer, name);
        try (Arena arena = Arena.ofShared();
             FileChannel channel = FileChannel.open(target, StandardOpenOption.CREATE, StandardOpenOption.READ,
                     StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            MemorySegment mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, remote.length(), arena);
            long read = read(peer, name, mapped);
            mapped.force();
            return read;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write region '" + name + "' to " + target, e);
        }
    }

    /** The transport's I/O threads touch the memory, so a confined arena's memory cannot be used. */
    private static void requireShared(MemorySegment segment, String what) {
        if (!segment.isAccessibleBy(OTHER_THREAD)) {
            throw new IllegalArgumentException(what + " is confined to one thread; allocate it from Arena.ofShared(), "
                    + "Arena.ofAuto() or Arena.global(), since the transport's I/O threads access it");
        }
    }

    private DirectoryClient client(InetSocketAddress peer) {
        checkOpen();
        DirectoryClient client = clients.compute(peer, (address, existing) -> {
            if (existing != null && existing.isUsable()) {
                return existing;
            }
            return new DirectoryClient(address, await(transport.connect(address), "connecting to " + address));
        });
        return client;
    }

    private <T> T await(CompletableFuture<T> future, String what) {
        Duration limit = transport.config().operationTimeout().plus(transport.config().connectTimeout());
        try {
            return future.get(limit.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RdmaException rdma) {
                throw rdma;
            }
            throw new RdmaException(what + " failed: " + e.getCause(), e.getCause());
        } catch (TimeoutException e) {
            future.cancel(true);
            throw new RdmaTimeoutException(what + " took longer than " + limit);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RdmaException(what + " was interrupted", e);
        }
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new IllegalStateException("the RdmaTemplate is closed (the application context is shutting down)");
        }
    }

    /** Closes connections to peers, then withdraws and deregisters every published region. */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        clients.values().forEach(DirectoryClient::close);
        clients.clear();
        closeServedConnections();
        for (PublishedRegion region : published.values()) {
            if (isReady(region)) {
                region.close();
            }
        }
        published.clear();
    }

    /** One connection to a publisher: lookups are matched to replies by correlation id. */
    private static final class DirectoryClient {
        private final InetSocketAddress peer;
        private final RdmaConnection connection;
        private final AtomicLong nextId = new AtomicLong(1);
        private final Map<Long, CompletableFuture<RegionDescriptor>> pending = new ConcurrentHashMap<>();

        DirectoryClient(InetSocketAddress peer, RdmaConnection connection) {
            this.peer = peer;
            this.connection = connection;
            Thread.ofVirtual().name("rdma4j-directory-client-" + peer).start(this::receiveReplies);
        }

        boolean isUsable() {
            return connection.isOpen();
        }

        CompletableFuture<RegionDescriptor> lookup(String name) {
            long id = nextId.getAndIncrement();
            CompletableFuture<RegionDescriptor> reply = new CompletableFuture<>();
            pending.put(id, reply);
            connection.send(DirectoryProtocol.lookup(id, name)).whenComplete((ok, error) -> {
                if (error != null) {
                    pending.remove(id);
                    reply.completeExceptionally(error);
                }
            });
            return reply;
        }

        private void receiveReplies() {
            try {
                while (connection.isOpen()) {
                    DirectoryProtocol.Message message = DirectoryProtocol.parse(connection.receive().join());
                    CompletableFuture<RegionDescriptor> reply = pending.remove(message.correlationId());
                    if (reply == null) {
                        continue; // the caller gave up (timeout) before the answer came
                    }
                    switch (message.type()) {
                        case DirectoryProtocol.FOUND -> reply.complete(RegionDescriptor.fromBytes(message.body()));
                        case DirectoryProtocol.NOT_FOUND -> reply.completeExceptionally(
                                new RegionNotFoundException(peer + ": " + DirectoryProtocol.readText(message.body())));
                        default -> reply.completeExceptionally(
                                new ProtocolException(peer + " refused the lookup: " + DirectoryProtocol.readText(message.body())));
                    }
                }
            } catch (RuntimeException e) {
                failAll(e);
            } finally {
                connection.close();
                failAll(new ConnectionClosedException("directory connection to " + peer + " closed"));
            }
        }

        private void failAll(Throwable cause) {
            pending.values().forEach(f -> f.completeExceptionally(cause));
            pending.clear();
        }

        void close() {
            connection.close();
        }
    }
}
