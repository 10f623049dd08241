package io.rdma4j.spring.boot;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestContext;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.core.RequestTypes;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
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

/**
 * Named regions for applications: {@code publish} memory, a direct buffer or a file under a name, and
 * {@code read} a peer's named region into local memory or a file. A peer finds a name with a
 * {@link RequestTypes#SPRING_REGION_LOOKUP} request on the connection to the publisher's {@link RdmaEndpoint}
 * (body: the name in UTF-8; reply: the region's {@link RegionDescriptor#toBytes()}, or a refusal saying which
 * names exist); the bytes then move one-sided, without the publisher's threads.
 *
 * <p>Thread-safe. Connections to peers are opened on first use and kept until {@link #close()}.
 */
public final class RdmaTemplate implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(RdmaTemplate.class.getName());

    /** Never started: only asks whether memory is usable from a thread other than its owner's. */
    private static final Thread OTHER_THREAD = Thread.ofVirtual().unstarted(() -> { });

    private final RdmaTransport transport;
    private final Map<String, PublishedRegion> published = new ConcurrentHashMap<>();
    /** Longest region name in UTF-8 bytes; keeps every lookup far below the smallest message size. */
    static final int MAX_NAME_BYTES = 1024;

    private final Map<InetSocketAddress, RdmaConnection> peers = new ConcurrentHashMap<>();
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
        return publish(name, buffer, null);
    }

    /** As {@link #publish(String, ByteBuffer)}; {@code ownedMemory}, if not null, is closed once the region is deregistered. */
    PublishedRegion publish(String name, ByteBuffer buffer, Arena ownedMemory) {
        if (!buffer.isDirect()) {
            throw new IllegalArgumentException("region '" + name + "': only a direct ByteBuffer can be published "
                    + "(use ByteBuffer.allocateDirect or a MemorySegment from an Arena)");
        }
        return publish(name, MemorySegment.ofBuffer(buffer), ownedMemory);
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

    /** As {@link #publish(String, MemorySegment)}; {@code ownedMemory}, if not null, is closed once the region is deregistered. */
    PublishedRegion publish(String name, MemorySegment segment, Arena ownedMemory) {
        nameBytes(name);
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

    private static byte[] nameBytes(String name) {
        if (name == null || name.isBlank()) {
            throw new IllegalArgumentException("region name must not be empty");
        }
        byte[] bytes = name.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_NAME_BYTES) {
            throw new IllegalArgumentException("region name is " + bytes.length + " bytes in UTF-8; use at most " + MAX_NAME_BYTES);
        }
        return bytes;
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

    /** What the endpoint's listener answers: region lookups. */
    RequestHandlers requestHandlers() {
        return RequestHandlers.of(RequestTypes.SPRING_REGION_LOOKUP, RequestHandler.answering(this::lookupReply));
    }

    /** Remembers a peer's connection so that stopping the endpoint closes it. */
    void accepted(RdmaConnection connection) {
        served.removeIf(c -> !c.isOpen());
        served.add(connection);
        if (closed.get()) {
            connection.close();
        }
    }

    private ByteBuffer lookupReply(ByteBuffer request, RequestContext context) {
        String name = StandardCharsets.UTF_8.decode(request).toString();
        return published(name).map(region -> ByteBuffer.wrap(region.descriptor().toBytes()))
                .orElseThrow(() -> new RequestRefusedException("no region named '" + name + "' is published here; published: "
                        + publishedNames()));
    }

    /** Closes the connections peers opened to look up regions (their pending requests fail). */
    void closeServedConnections() {
        served.forEach(RdmaConnection::close);
        served.clear();
    }

    // ---------------------------------------------------------------- reading (the client's side)

    /**
     * The descriptor of the region {@code peer} published under {@code name}.
     *
     * @throws ProtocolException when the reply is not one readable region descriptor of this transport's provider
     */
    public RegionDescriptor lookup(InetSocketAddress peer, String name) {
        byte[] request = nameBytes(name);
        ByteBuffer reply;
        try {
            reply = connection(peer).requestAndWait(RequestTypes.SPRING_REGION_LOOKUP, ByteBuffer.wrap(request));
        } catch (RemoteRequestException e) {
            if (e.status() == RemoteRequestException.Status.REFUSED) {
                throw new RegionNotFoundException(peer + ": " + e.reason());
            }
            throw e;
        }
        return lookupReply(peer, name, reply);
    }

    /** Checks the peer's answer to a lookup of {@code name} before its length sizes anything. */
    private RegionDescriptor lookupReply(InetSocketAddress peer, String name, ByteBuffer reply) {
        if (reply.remaining() != RegionDescriptor.SERIALIZED_SIZE) {
            throw new ProtocolException(peer + " answered the lookup of region '" + name + "' with " + reply.remaining()
                    + " bytes, not a " + RegionDescriptor.SERIALIZED_SIZE + "-byte region descriptor");
        }
        RegionDescriptor remote;
        try {
            remote = RegionDescriptor.fromBytes(reply);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(peer + " answered the lookup of region '" + name + "' with a malformed descriptor: "
                    + e.getMessage());
        }
        if (!remote.provider().equals(transport.provider()) || !remote.allows(Access.REMOTE_READ)) {
            throw new ProtocolException(peer + " answered the lookup of region '" + name + "' with " + remote
                    + ", which this " + transport.provider() + " transport cannot read");
        }
        return remote;
    }

    /**
     * Reads the whole region {@code peer} published under {@code name} into the start of {@code sink}
     * (native memory at least as large as the region), registering it for the duration of the read. The
     * transport's threads write into the sink: allocate it from {@code Arena.ofShared()}, {@code Arena.ofAuto()}
     * or {@code Arena.global()}; a confined one is refused before the peer is asked.
     *
     * @return the number of bytes read (the region's size)
     * @throws IllegalArgumentException when the sink is confined to one thread, read-only or smaller than the region
     */
    public long read(InetSocketAddress peer, String name, MemorySegment sink) {
        requireShared(sink, "the sink of a read");
        return read(peer, name, lookup(peer, name), sink);
    }

    @SuppressWarnings("try") // the registration is only held open, so the NIC may write into the sink until the read ends
    private long read(InetSocketAddress peer, String name, RegionDescriptor remote, MemorySegment sink) {
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
            await(connection(peer).read(remote, 0, target), "reading region '" + name + "' from " + peer);
            return remote.length();
        }
    }

    /**
     * Reads the region into new memory of {@code arena} (a shared, auto or global arena), if it is at most the
     * machine's physical memory.
     */
    public MemorySegment read(InetSocketAddress peer, String name, Arena arena) {
        return read(peer, name, arena, physicalMemory());
    }

    /**
     * Reads the region into new memory of {@code arena} (a shared, auto or global arena).
     *
     * @throws RegionTooLargeException when the peer's region has more than {@code maxBytes}, before anything is allocated
     */
    public MemorySegment read(InetSocketAddress peer, String name, Arena arena, long maxBytes) {
        RegionDescriptor remote = lookup(peer, name);
        requireAtMost(peer, name, remote, maxBytes, "the read's limit");
        MemorySegment sink = arena.allocate(remote.length(), 64);
        read(peer, name, remote, sink);
        return sink;
    }

    /**
     * Reads the region into {@code target} (created or replaced, written through a mapping, then forced to disk), if it
     * fits the usable space of the target's file system.
     */
    public long readToFile(InetSocketAddress peer, String name, Path target) {
        return readToFile(peer, name, target, Long.MAX_VALUE);
    }

    /**
     * Reads the region into {@code target} (created or replaced, written through a mapping, then forced to disk).
     *
     * @throws RegionTooLargeException when the peer's region has more than {@code maxBytes} or more than the usable
     *                                 space of the target's file system, before the file is created
     */
    public long readToFile(InetSocketAddress peer, String name, Path target, long maxBytes) {
        RegionDescriptor remote = lookup(peer, name);
        requireAtMost(peer, name, remote, maxBytes, "the read's limit");
        requireAtMost(peer, name, remote, usableSpace(target), "the usable space of the file system of " + target);
        try (Arena arena = Arena.ofShared();
             FileChannel channel = FileChannel.open(target, StandardOpenOption.CREATE, StandardOpenOption.READ,
                     StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            MemorySegment mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, remote.length(), arena);
            long read = read(peer, name, remote, mapped);
            mapped.force();
            return read;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write region '" + name + "' to " + target, e);
        }
    }

    private static void requireAtMost(InetSocketAddress peer, String name, RegionDescriptor remote, long maxBytes, String limit) {
        if (remote.length() > maxBytes) {
            throw new RegionTooLargeException("region '" + name + "' at " + peer + " has " + remote.length() + " bytes, more than "
                    + limit + " (" + maxBytes + " bytes); nothing was allocated for it");
        }
    }

    private static long usableSpace(Path target) {
        Path dir = target.toAbsolutePath().getParent();
        try {
            return Files.getFileStore(dir).getUsableSpace();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot tell the usable space for " + target, e);
        }
    }

    private static long physicalMemory() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean())
                .getTotalMemorySize();
    }

    /** The transport's I/O threads touch the memory, so a confined arena's memory cannot be used. */
    private static void requireShared(MemorySegment segment, String what) {
        if (!segment.isAccessibleBy(OTHER_THREAD)) {
            throw new IllegalArgumentException(what + " is confined to one thread; allocate it from Arena.ofShared(), "
                    + "Arena.ofAuto() or Arena.global(), since the transport's I/O threads access it");
        }
    }

    private RdmaConnection connection(InetSocketAddress peer) {
        checkOpen();
        return peers.compute(peer, (address, existing) -> {
            if (existing != null && existing.isOpen()) {
                return existing;
            }
            return await(transport.connect(address), "connecting to " + address);
        });
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
        peers.values().forEach(RdmaConnection::close);
        peers.clear();
        closeServedConnections();
        for (PublishedRegion region : published.values()) {
            if (isReady(region)) {
                region.close();
            }
        }
        published.clear();
    }
}
