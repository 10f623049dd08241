package io.rdma4j.core.contract;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.Peer;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.ReceiveBuffers;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.OperationType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What every provider must do, unchanged: subclasses only say how to configure the transport and
 * where to listen (the soft-RDMA lab passes the RDMA device's address). Two transports in this JVM
 * play requester and responder.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
public abstract class ProviderContractTest {

    protected static final long WAIT_SECONDS = 60;

    /** The configuration both sides use (the provider named explicitly). */
    protected abstract TransportConfig config();

    /** The provider name {@link #config()} selects. */
    protected abstract String expectedProvider();

    /** The principal a handler sees for the client: empty unless the config authenticates identities. */
    protected Optional<String> expectedPrincipal() {
        return Optional.empty();
    }

    /** Where the responder listens; loopback by default. */
    protected InetSocketAddress listenAddress() {
        return new InetSocketAddress("127.0.0.1", 0);
    }

    protected Arena arena;
    protected RdmaTransport server;
    protected RdmaTransport client;
    protected RdmaListener listener;
    protected RdmaConnection connection;
    protected final BlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();

    @BeforeEach
    void openTransports() throws Exception {
        arena = Arena.ofShared();
        server = RdmaTransport.open(config());
        client = RdmaTransport.open(config());
        listener = server.listen(listenAddress(), accepted::add);
        connection = connect(client);
    }

    @AfterEach
    void closeTransports() {
        if (client != null) {
            client.close();
        }
        if (server != null) {
            server.close();
        }
        arena.close();
    }

    protected RdmaConnection connect(RdmaTransport from) throws Exception {
        return from.connect(listener.localAddress()).get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    protected static byte pattern(long i) {
        return (byte) (i * 31 + (i >>> 8) + 7);
    }

    /** A region of {@code size} bytes filled with {@link #pattern}. */
    protected RegisteredRegion published(RdmaTransport on, long size, java.util.Set<Access> access) {
        MemorySegment s = arena.allocate(size, 64);
        for (long i = 0; i < size; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, pattern(i));
        }
        return on.register(s, access);
    }

    protected RegisteredRegion sink(RdmaTransport on, long size) {
        return on.register(arena.allocate(Math.max(1, size), 64), Access.readSink());
    }

    /** A refused read returned no data: the sink still holds the zeros it was allocated with. */
    protected static void assertUntouched(MemorySegment sink) {
        for (long i = 0; i < sink.byteSize(); i++) {
            if (sink.get(ValueLayout.JAVA_BYTE, i) != 0) {
                throw new AssertionError("byte " + i + " of the sink of a refused read was written");
            }
        }
    }

    protected static void assertPattern(MemorySegment data, long remoteOffset) {
        for (long i = 0; i < data.byteSize(); i++) {
            byte expected = pattern(remoteOffset + i);
            byte actual = data.get(ValueLayout.JAVA_BYTE, i);
            if (expected != actual) {
                throw new AssertionError("byte " + i + " (remote offset " + (remoteOffset + i) + ") is " + actual
                        + ", expected " + expected);
            }
        }
    }

    protected static <T> T await(CompletableFuture<T> f) throws Exception {
        return f.get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    /** The exception a future failed with (unwrapped), failing the test if it succeeded. */
    protected static Throwable failureOf(CompletableFuture<?> f) throws Exception {
        try {
            f.get(WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("operation succeeded but was expected to fail");
    }

    protected static RemoteAccessException.Reason refusal(CompletableFuture<?> f) throws Exception {
        Throwable t = failureOf(f);
        assertThat(t).isInstanceOf(RemoteAccessException.class);
        return ((RemoteAccessException) t).reason();
    }

    /**
     * Whether the provider tells refusal reasons apart. An RDMA NIC reports one completion status
     * (remote access error) for a bad key, a bad range and missing rights alike.
     */
    protected boolean reportsPreciseRefusalReasons() {
        return true;
    }

    /**
     * Whether the responder's transport sees the peer's one-sided operations, so that it can count them
     * (served bytes and operations, rejected requests). RDMA READ and WRITE are carried out by the
     * responder's NIC and never reach its CPU, so a verbs responder cannot count them.
     */
    protected boolean countsResponderWork() {
        return true;
    }

    /**
     * Whether a refusal by the peer may reach the requester as the loss of the connection
     * ({@link ConnectionClosedException}) instead of a {@link RemoteAccessException}. iWARP responders
     * (siw) answer a refused request with a TERMINATE message that tears the connection down, and the
     * requester's work request is then flushed. The refusal must still fail the operation, return no data
     * and close the connection.
     */
    protected boolean refusalsMayArriveAsConnectionLoss() {
        return false;
    }

    /**
     * Whether the completion of a one-sided WRITE means the responder accepted it. On iWARP a WRITE
     * completes at the requester once its data is handed to the transport; the responder checks the key and
     * rights afterwards and answers a refusal by terminating the connection. Where this is false, a
     * refused write may complete, but it still must not modify the memory, and the requester must then
     * lose the connection.
     */
    protected boolean writeCompletionsConfirmAcceptance() {
        return true;
    }

    /**
     * Whether the responder enforces a region's REMOTE_READ right against a forged descriptor. The siw
     * kernel driver (Linux 6.1, siw_qp_tx.c) checks the source of a READ response with no rights at all
     * ("w/o checking access for LOCAL_READ permission"), so it serves READs of any valid key of its
     * protection domain. Keys and ranges are still checked there.
     */
    protected boolean enforcesRemoteReadRight() {
        return true;
    }

    /**
     * Whether the provider reads two-sided messages into buffers the application lent ({@link ReceiveBuffers}). verbs
     * reassembles each message from its registered receive slots into a buffer of its own, which the application gets.
     */
    protected boolean readsIntoLentBuffers() {
        return true;
    }

    /** Whether the provider sends a buffer lent to {@code sendInPlace} from its memory. verbs copies it into registered memory. */
    protected boolean sendsInPlace() {
        return true;
    }

    /** The failure of an operation the peer refused: the exception, checked to be a refusal. */
    protected Throwable refusedByPeerFailure(CompletableFuture<?> f) throws Exception {
        Throwable t = failureOf(f);
        if (refusalsMayArriveAsConnectionLoss() && t instanceof ConnectionClosedException) {
            return t;
        }
        assertThat(t).isInstanceOf(RemoteAccessException.class);
        return t;
    }

    /**
     * A refusal by the peer: a {@link RemoteAccessException} with {@code expected} as its reason (where
     * the provider can tell), after which the connection is closed, as a verbs queue pair enters the
     * error state. The test continues on a new connection.
     */
    protected void refusedByPeer(CompletableFuture<?> f, RemoteAccessException.Reason expected) throws Exception {
        Throwable t = refusedByPeerFailure(f);
        if (reportsPreciseRefusalReasons() && t instanceof RemoteAccessException refusedWith) {
            assertThat(refusedWith.reason()).isEqualTo(expected);
        }
        awaitNewConnectionAfterRefusal();
    }

    /** The refused connection is closed (operations on it fail as closed); continues on a new one. */
    protected void awaitNewConnectionAfterRefusal() throws Exception {
        RdmaConnection refused = connection;
        eventually("the refused connection is closed", () -> !refused.isOpen());
        assertThat(failureOf(refused.read(dummyDescriptor(), 0, sink(client, 8).segment())))
                .isInstanceOf(ConnectionClosedException.class);
        connection = connect(client);
    }

    private RegionDescriptor dummyDescriptor() {
        return published(server, 64, Access.remoteRead()).descriptor();
    }

    protected static void eventually(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(10);
        }
    }

    // ---- selection and registration ----

    @Test
    void reportsTheSelectedProviderAndWhy() {
        assertThat(server.provider()).isEqualTo(expectedProvider());
        assertThat(connection.provider()).isEqualTo(expectedProvider());
        assertThat(server.selection().reason()).isNotBlank();
    }

    @Test
    void descriptorRoundTripsAndDescribesTheRegion() {
        RegisteredRegion r = published(server, 4096, Access.remoteRead());
        RegionDescriptor d = r.descriptor();
        assertThat(d.provider()).isEqualTo(expectedProvider());
        assertThat(d.address()).isEqualTo(r.segment().address());
        assertThat(d.length()).isEqualTo(4096);
        assertThat(d.key()).isNotZero();
        assertThat(d.allows(Access.REMOTE_READ)).isTrue();
        assertThat(d.allows(Access.REMOTE_WRITE)).isFalse();
        assertThat(RegionDescriptor.fromBytes(d.toBytes())).isEqualTo(d);
        RegisteredRegion other = published(server, 4096, Access.remoteRead());
        assertThat(other.descriptor().key()).isNotEqualTo(d.key());
        assertThat(server.registeredRegions()).isEqualTo(2);
    }

    // ---- reads ----

    @ParameterizedTest(name = "{0} bytes")
    @ValueSource(longs = {1, 64, 4096, 1 << 20, (3L << 20) + 12345})
    void readsWhatThePeerPublished(long size) throws Exception {
        long offset = 13;
        RegisteredRegion remote = published(server, size + offset, Access.remoteRead());
        RegisteredRegion local = sink(client, size);
        await(connection.read(remote.descriptor(), offset, local.segment()));
        assertPattern(local.segment(), offset);
    }

    @Test
    void zeroLengthReadCompletes() throws Exception {
        RegisteredRegion remote = published(server, 64, Access.remoteRead());
        RegisteredRegion local = sink(client, 64);
        await(connection.read(remote.descriptor(), 64, local.segment().asSlice(0, 0)));
    }

    @Test
    void readAllFetchesManyRangesIntoOneSink() throws Exception {
        int ranges = 300;
        RegisteredRegion remote = published(server, 1 << 20, Access.remoteRead());
        Random random = new Random(42);
        long[] offsets = new long[ranges];
        long[] lengths = new long[ranges];
        long total = 0;
        for (int i = 0; i < ranges; i++) {
            lengths[i] = 1 + random.nextInt(8192);
            offsets[i] = random.nextLong((1 << 20) - lengths[i]);
            total += lengths[i];
        }
        RegisteredRegion local = sink(client, total);
        List<ReadRequest> reads = new ArrayList<>();
        long at = 0;
        for (int i = 0; i < ranges; i++) {
            reads.add(new ReadRequest(remote.descriptor(), offsets[i], local.segment().asSlice(at, lengths[i])));
            at += lengths[i];
        }
        await(connection.readAll(reads));
        at = 0;
        for (int i = 0; i < ranges; i++) {
            assertPattern(local.segment().asSlice(at, lengths[i]), offsets[i]);
            at += lengths[i];
        }
    }

    // ---- files ----

    @Test
    void registeredFileIsReadByThePeerAndItsLengthIsChecked() throws Exception {
        java.nio.file.Path file = java.nio.file.Files.createTempFile("rdma4j-contract", ".bin");
        try {
            int size = 3 * 4096 + 17;
            byte[] content = new byte[size];
            for (int i = 0; i < size; i++) {
                content[i] = pattern(i);
            }
            java.nio.file.Files.write(file, content);
            assertThatThrownBy(() -> server.registerFile(file, size + 1, arena))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fewer than");
            assertThatThrownBy(() -> server.registerFile(file, 0, arena)).isInstanceOf(IllegalArgumentException.class);
            for (int round = 0; round < 2; round++) { // the second round takes whichever mapping the first settled on
                RegisteredRegion region = server.registerFile(file, size - round, arena);
                assertThat(region.descriptor().length()).isEqualTo(size - round);
                assertThat(region.descriptor().allows(Access.REMOTE_WRITE)).isFalse();
                RegisteredRegion local = sink(client, size - round);
                connection.readAndWait(region.descriptor(), 0, local.segment());
                assertPattern(local.segment(), 0);
                region.close();
            }
            assertThat(java.nio.file.Files.readAllBytes(file)).as("the file is unchanged").isEqualTo(content);
        } finally {
            java.nio.file.Files.deleteIfExists(file);
        }
    }

    // ---- reads the caller waits for ----

    @ParameterizedTest(name = "{0} bytes")
    @ValueSource(longs = {8, 4096, (1 << 20) + 3})
    void readAndWaitReturnsWithTheBytes(long size) {
        RegisteredRegion remote = published(server, size + 5, Access.remoteRead());
        RegisteredRegion local = sink(client, size);
        connection.readAndWait(remote.descriptor(), 5, local.segment());
        assertPattern(local.segment(), 5);
        assertThat(connection.outstandingOperations()).isZero();
    }

    @Test
    void readAndWaitInterleavesWithAsynchronousReads() throws Exception {
        // A waiting caller may reap the completions of other operations: they must still complete.
        RegisteredRegion remote = published(server, 1 << 20, Access.remoteRead());
        RegisteredRegion asyncSinks = sink(client, 64 * 4096);
        RegisteredRegion small = sink(client, 8);
        List<CompletableFuture<Void>> pending = new ArrayList<>();
        long readsBefore = client.metrics().snapshot(OperationType.READ).successes();
        for (int round = 0; round < 200; round++) {
            int slot = round % 64;
            if (pending.size() == 64) {
                await(pending.removeFirst());
            }
            pending.add(connection.read(remote.descriptor(), slot * 4096L, asyncSinks.segment().asSlice(slot * 4096L, 4096)));
            connection.readAndWait(remote.descriptor(), round * 8L, small.segment());
            assertPattern(small.segment(), round * 8L);
        }
        for (CompletableFuture<Void> f : pending) {
            await(f);
        }
        assertPattern(asyncSinks.segment(), 0);
        assertThat(client.metrics().snapshot(OperationType.READ).successes() - readsBefore).as("reads counted, both kinds").isEqualTo(400);
    }

    @Test
    void readAndWaitThrowsWhatTheReadFailsWith() throws Exception {
        RegisteredRegion remote = published(server, 4096, Access.remoteRead());
        RegisteredRegion local = sink(client, 64);
        RegionDescriptor d = remote.descriptor();
        assertThatThrownBy(() -> connection.readAndWait(d, 4096 - 63, local.segment()))
                .isInstanceOfSatisfying(RemoteAccessException.class,
                        e -> assertThat(e.reason()).isEqualTo(RemoteAccessException.Reason.OUT_OF_RANGE));
        assertThat(connection.isOpen()).as("a refusal by the local pre-check keeps the connection").isTrue();
        RegionDescriptor forged = new RegionDescriptor(d.provider(), d.address(), d.length(), d.key() ^ 0x5a5a5a5a5a5aL, d.access());
        refusedByPeer(asFuture(() -> connection.readAndWait(forged, 0, local.segment())), RemoteAccessException.Reason.UNKNOWN_KEY);
        assertUntouched(local.segment());
        assertThat(connection.isOpen()).isTrue(); // the new connection after the refusal
        connection.close();
        assertThatThrownBy(() -> connection.readAndWait(d, 0, local.segment())).isInstanceOf(ConnectionClosedException.class);
    }

    /** A blocking call's outcome as a completed future, for the helpers that judge futures. */
    protected static CompletableFuture<Void> asFuture(Runnable blocking) {
        try {
            blocking.run();
            return CompletableFuture.completedFuture(null);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    // ---- writes ----

    @Test
    void writesIntoARemoteWritableRegion() throws Exception {
        long size = (2L << 20) + 99;
        RegisteredRegion target = server.register(arena.allocate(size + 100, 64), Access.remoteReadWrite());
        MemorySegment src = arena.allocate(size, 64);
        for (long i = 0; i < size; i++) {
            src.set(ValueLayout.JAVA_BYTE, i, pattern(i));
        }
        RegisteredRegion source = client.register(src, Access.readSink());
        await(connection.write(target.descriptor(), 100, source.segment()));
        assertPattern(target.segment().asSlice(100, size), 0);
        assertThat(target.segment().get(ValueLayout.JAVA_BYTE, 99)).isZero();
    }

    @Test
    void writeToAReadOnlyRegionIsDeniedLocallyAndByTheResponder() throws Exception {
        RegisteredRegion readOnly = published(server, 4096, Access.remoteRead());
        RegisteredRegion source = sink(client, 64);
        assertThat(refusal(connection.write(readOnly.descriptor(), 0, source.segment())))
                .isEqualTo(RemoteAccessException.Reason.ACCESS_DENIED);
        assertThat(connection.isOpen()).as("a refusal by the local pre-check keeps the connection").isTrue();
        // A descriptor forged to claim write access is refused by the responder itself.
        RegionDescriptor d = readOnly.descriptor();
        RegionDescriptor forged = new RegionDescriptor(d.provider(), d.address(), d.length(), d.key(),
                EnumSet.of(Access.REMOTE_READ, Access.REMOTE_WRITE));
        long rejectedBefore = server.metrics().rejectedRequests();
        source.segment().fill((byte) 0x55);
        CompletableFuture<Void> write = connection.write(forged, 0, source.segment());
        if (writeCompletionsConfirmAcceptance()) {
            refusedByPeer(write, RemoteAccessException.Reason.ACCESS_DENIED);
        } else {
            // the refusal may follow the local completion: it must still end the connection
            try {
                await(write);
            } catch (ExecutionException e) {
                assertThat(e.getCause()).isInstanceOfAny(RemoteAccessException.class, ConnectionClosedException.class);
            }
            awaitNewConnectionAfterRefusal();
        }
        assertPattern(readOnly.segment(), 0);
        if (countsResponderWork()) {
            assertThat(server.metrics().rejectedRequests()).isGreaterThan(rejectedBefore);
        }
    }

    @Test
    void readOfARegionWithoutRemoteReadIsDeniedByTheResponder() throws Exception {
        RegisteredRegion writeOnly = server.register(arena.allocate(4096, 64), EnumSet.of(Access.REMOTE_WRITE));
        RegisteredRegion local = sink(client, 64);
        RegionDescriptor d = writeOnly.descriptor();
        RegionDescriptor forged = new RegionDescriptor(d.provider(), d.address(), d.length(), d.key(), Access.remoteReadWrite());
        writeOnly.segment().fill((byte) 0x77);
        if (!enforcesRemoteReadRight()) {
            // the responder serves it (see enforcesRemoteReadRight): the local pre-check is all there is
            assertThat(refusal(connection.read(d, 0, local.segment()))).isEqualTo(RemoteAccessException.Reason.ACCESS_DENIED);
            return;
        }
        refusedByPeer(connection.read(forged, 0, local.segment()), RemoteAccessException.Reason.ACCESS_DENIED);
        assertUntouched(local.segment());
    }

    // ---- keys and bounds ----

    @Test
    void forgedKeyIsRefused() throws Exception {
        RegisteredRegion remote = published(server, 4096, Access.remoteRead());
        RegisteredRegion local = sink(client, 64);
        RegionDescriptor d = remote.descriptor();
        RegionDescriptor forged = new RegionDescriptor(d.provider(), d.address(), d.length(), d.key() ^ 0x5a5a5a5a5a5aL, d.access());
        refusedByPeer(connection.read(forged, 0, local.segment()), RemoteAccessException.Reason.UNKNOWN_KEY);
        assertUntouched(local.segment());
        // the genuine key works on a new connection
        await(connection.read(d, 0, local.segment()));
        assertPattern(local.segment(), 0);
    }

    @Test
    void staleKeyAfterDeregistrationIsRefused() throws Exception {
        RegisteredRegion remote = published(server, 4096, Access.remoteRead());
        RegisteredRegion local = sink(client, 64);
        RegionDescriptor d = remote.descriptor();
        await(connection.read(d, 0, local.segment()));
        remote.close();
        assertThat(remote.isOpen()).isFalse();
        local.segment().fill((byte) 0);
        refusedByPeer(connection.read(d, 0, local.segment()), RemoteAccessException.Reason.UNKNOWN_KEY);
        assertUntouched(local.segment());
    }

    @Test
    void outOfRangeAndOverflowAreRefusedLocally() throws Exception {
        RegisteredRegion remote = published(server, 4096, Access.remoteRead());
        RegisteredRegion local = sink(client, 64);
        RegionDescriptor d = remote.descriptor();
        assertThat(refusal(connection.read(d, 4096 - 63, local.segment()))).isEqualTo(RemoteAccessException.Reason.OUT_OF_RANGE);
        assertThat(refusal(connection.read(d, -1, local.segment()))).isEqualTo(RemoteAccessException.Reason.OUT_OF_RANGE);
        assertThat(refusal(connection.read(d, Long.MAX_VALUE - 10, local.segment()))).isEqualTo(RemoteAccessException.Reason.OUT_OF_RANGE);
        assertThat(connection.isOpen()).as("a refusal by the local pre-check keeps the connection").isTrue();
    }

    @Test
    void outOfRangeIsRefusedByTheResponderForForgedDescriptors() throws Exception {
        RegisteredRegion remote = published(server, 4096, Access.remoteRead());
        RegisteredRegion local = sink(client, 8192);
        RegionDescriptor d = remote.descriptor();
        RegionDescriptor tooLong = new RegionDescriptor(d.provider(), d.address(), 1L << 40, d.key(), d.access());
        refusedByPeer(connection.read(tooLong, 4000, local.segment().asSlice(0, 200)), RemoteAccessException.Reason.OUT_OF_RANGE);
        RegionDescriptor before = new RegionDescriptor(d.provider(), d.address() - 64, 8192, d.key(), d.access());
        refusedByPeer(connection.read(before, 0, local.segment().asSlice(0, 128)), RemoteAccessException.Reason.OUT_OF_RANGE);
        RegionDescriptor wrapping = new RegionDescriptor(d.provider(), Long.MAX_VALUE - 8, Long.MAX_VALUE, d.key(), d.access());
        refusedByPeer(connection.read(wrapping, 0, local.segment().asSlice(0, 64)), RemoteAccessException.Reason.OUT_OF_RANGE);
        assertUntouched(local.segment());
        await(connection.read(d, 0, local.segment().asSlice(0, 4096)));
        assertPattern(local.segment().asSlice(0, 4096), 0);
    }

    @Test
    void sinkOutsideARegisteredRegionIsRejected() throws Exception {
        RegisteredRegion remote = published(server, 4096, Access.remoteRead());
        MemorySegment unregistered = arena.allocate(64);
        assertThat(failureOf(connection.read(remote.descriptor(), 0, unregistered))).isInstanceOf(IllegalArgumentException.class);
        RegisteredRegion readOnlySink = client.register(arena.allocate(64), Access.remoteRead());
        assertThat(failureOf(connection.read(remote.descriptor(), 0, readOnlySink.segment())))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("LOCAL_WRITE");
    }

    // ---- two-sided ----

    @Test
    void messagesArriveInOrderUpToTheMaxSize() throws Exception {
        RdmaConnection serverSide = accepted.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        int count = 500;
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sent.add(connection.send(("message " + i).getBytes(StandardCharsets.UTF_8)));
        }
        for (int i = 0; i < count; i++) {
            ByteBuffer m = await(serverSide.receive());
            assertThat(StandardCharsets.UTF_8.decode(m).toString()).isEqualTo("message " + i);
        }
        sent.forEach(f -> f.join());
        int max = config().maxMessageSize();
        byte[] big = new byte[max];
        new Random(7).nextBytes(big);
        await(serverSide.send(big));
        ByteBuffer got = await(connection.receive());
        byte[] copy = new byte[got.remaining()];
        got.get(copy);
        assertThat(copy).isEqualTo(big);
        assertThat(failureOf(connection.send(new byte[max + 1]))).isInstanceOf(IllegalArgumentException.class);
    }

    /**
     * A peer that sends and closes once its sends completed, as a stream's writer closes after its last write: what
     * it sent is received, whole and in order, and only then does the connection end.
     */
    @Test
    void messagesSentBeforeThePeerClosedAreReceivedBeforeTheClose() throws Exception {
        RdmaConnection serverSide = accepted.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        int count = 64;
        byte[] last = new byte[config().maxMessageSize()];
        new Random(13).nextBytes(last);
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sent.add(connection.send(("message " + i).getBytes(StandardCharsets.UTF_8)));
        }
        sent.add(connection.send(last));
        for (CompletableFuture<Void> f : sent) {
            await(f);
        }
        connection.close();
        for (int i = 0; i < count; i++) {
            ByteBuffer m = await(serverSide.receive());
            assertThat(StandardCharsets.UTF_8.decode(m).toString()).as("message %d after the peer closed", i)
                    .isEqualTo("message " + i);
        }
        ByteBuffer got = await(serverSide.receive());
        byte[] copy = new byte[got.remaining()];
        got.get(copy);
        assertThat(copy).as("the largest message, sent last").isEqualTo(last);
        assertThat(failureOf(serverSide.receive())).isInstanceOf(ConnectionClosedException.class);
    }

    /**
     * An accepting side that sends the moment it has the connection: its messages may reach the connecting side
     * before that side has handled its own connection's establishment, and still arrive, whole and in order.
     */
    @Test
    void messagesSentTheMomentAConnectionIsAcceptedArrive() throws Exception {
        RdmaListener greeting = server.listen(listenAddress(), c -> {
            c.send("hello".getBytes(StandardCharsets.UTF_8));
            c.send("world".getBytes(StandardCharsets.UTF_8));
        });
        for (int i = 0; i < 24; i++) {
            RdmaConnection c = client.connect(greeting.localAddress()).get(WAIT_SECONDS, TimeUnit.SECONDS);
            assertThat(StandardCharsets.UTF_8.decode(await(c.receive())).toString()).as("connection %d", i)
                    .isEqualTo("hello");
            assertThat(StandardCharsets.UTF_8.decode(await(c.receive())).toString()).as("connection %d", i)
                    .isEqualTo("world");
            c.close();
        }
        greeting.close();
    }

    /**
     * A send given an executor completes its future there, and on the completion threads when the executor refuses;
     * the messages arrive either way.
     */
    @Test
    void aSendGivenAnExecutorCompletesThere() throws Exception {
        RdmaConnection serverSide = accepted.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        List<Runnable> tasks = new java.util.concurrent.CopyOnWriteArrayList<>();
        CompletableFuture<Void> sent = connection.send(ByteBuffer.wrap("on the loop".getBytes(StandardCharsets.UTF_8)),
                tasks::add);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_SECONDS);
        while (tasks.isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(tasks).as("the completion handed to the executor").hasSize(1);
        assertThat(sent).as("not completed before the executor ran its task").isNotDone();
        tasks.getFirst().run();
        await(sent);
        CompletableFuture<Void> refused = connection.send(ByteBuffer.wrap("refused".getBytes(StandardCharsets.UTF_8)),
                task -> {
                    throw new java.util.concurrent.RejectedExecutionException("shut down");
                });
        await(refused);
        assertThat(StandardCharsets.UTF_8.decode(await(serverSide.receive())).toString()).isEqualTo("on the loop");
        assertThat(StandardCharsets.UTF_8.decode(await(serverSide.receive())).toString()).isEqualTo("refused");
    }

    /**
     * An event loop's poller: whether the provider reads the connection on the loop's thread (tcp) or declines (verbs,
     * TLS), a connection attached to a polling loop receives messages of several sizes whole and in order, the loop
     * sends back, and once the poller is closed the connection is read as before.
     */
    @Test
    void aConnectionOnAPollingLoopExchangesMessagesAsBefore() throws Exception {
        RdmaConnection serverSide = accepted.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        io.rdma4j.core.ConnectionPoller poller = server.openPoller();
        java.util.concurrent.ConcurrentLinkedQueue<Runnable> tasks = new java.util.concurrent.ConcurrentLinkedQueue<>();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread loop = Thread.ofPlatform().name("contract-loop").start(() -> {
            while (!stop.get()) {
                Runnable r;
                while ((r = tasks.poll()) != null) {
                    r.run();
                }
                poller.poll(TimeUnit.MILLISECONDS.toNanos(100));
            }
            poller.close();
        });
        java.util.concurrent.Executor onLoop = task -> {
            tasks.add(task);
            poller.wakeup();
        };
        try {
            CompletableFuture<Boolean> attached = new CompletableFuture<>();
            onLoop.execute(() -> attached.complete(poller.attach(serverSide)));
            await(attached);
            int[] sizes = {1, 100, 5000, config().maxMessageSize()};
            int count = 200;
            for (int m = 0; m < count; m++) {
                ByteBuffer b = ByteBuffer.allocate(sizes[m % sizes.length]);
                for (int i = 0; i < b.capacity(); i++) {
                    b.put((byte) (m + i));
                }
                connection.send(b.flip());
            }
            for (int m = 0; m < count; m++) {
                ByteBuffer got = await(serverSide.receive(onLoop));
                assertThat(got.remaining()).isEqualTo(sizes[m % sizes.length]);
                for (int i = 0; i < got.remaining(); i++) {
                    assertThat(got.get(got.position() + i)).as("message " + m + " byte " + i).isEqualTo((byte) (m + i));
                }
            }
            CompletableFuture<CompletableFuture<Void>> reply = new CompletableFuture<>();
            onLoop.execute(() -> reply.complete(serverSide.send(ByteBuffer.wrap("from the loop".getBytes(StandardCharsets.UTF_8)), onLoop)));
            await(await(reply));
            assertThat(StandardCharsets.UTF_8.decode(await(connection.receive())).toString()).isEqualTo("from the loop");
        } finally {
            stop.set(true);
            poller.wakeup();
            loop.join(TimeUnit.SECONDS.toMillis(WAIT_SECONDS));
        }
        assertThat(loop.isAlive()).isFalse();
        connection.send(ByteBuffer.wrap("after the loop".getBytes(StandardCharsets.UTF_8)));
        assertThat(StandardCharsets.UTF_8.decode(await(serverSide.receive())).toString()).isEqualTo("after the loop");
    }

    /**
     * A message's buffer is the caller's again once {@code send} returns, whether the provider wrote it at once or
     * not yet: one direct buffer, refilled for each of many large messages and scrambled right after each send, while
     * the peer does not receive yet (so the socket fills up and later messages wait), delivers every message as it was
     * when sent.
     */
    @Test
    void aSentBufferIsTheCallersAgainOnceSendReturns() throws Exception {
        RdmaConnection serverSide = accepted.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        int size = config().maxMessageSize();
        int count = (int) Math.max(8, Math.min(48, (6L << 20) / size));
        ByteBuffer reused = ByteBuffer.allocateDirect(size);
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int m = 0; m < count; m++) {
            sent.add(connection.send(numbered(reused, m)));
            scramble(reused);
        }
        assertNumberedMessages(serverSide, count, size, "changed after send returned");
        for (CompletableFuture<Void> f : sent) {
            await(f);
        }
    }

    /** {@code b} filled with message {@code m}'s bytes, ready to send. */
    private static ByteBuffer numbered(ByteBuffer b, int m) {
        b.clear();
        while (b.hasRemaining()) {
            b.put((byte) (m * 7 + b.position()));
        }
        return b.flip();
    }

    private static void scramble(ByteBuffer b) {
        b.clear();
        while (b.hasRemaining()) {
            b.put((byte) 0x5a);
        }
    }

    /** Receives {@code count} messages of {@code size} bytes, each as {@link #numbered} made it. */
    private static void assertNumberedMessages(RdmaConnection on, int count, int size, String otherwise) throws Exception {
        for (int m = 0; m < count; m++) {
            ByteBuffer got = await(on.receive());
            assertThat(got.remaining()).as("message %d", m).isEqualTo(size);
            for (int i = 0; i < size; i++) {
                if (got.get(got.position() + i) != (byte) (m * 7 + i)) {
                    throw new AssertionError("message " + m + " byte " + i + " " + otherwise);
                }
            }
        }
    }

    /**
     * A buffer lent to {@code sendInPlace} is read by the transport only until its future completes: many large
     * messages, each from its own direct buffer, while the peer does not receive yet (so later ones wait), each buffer
     * scrambled the moment its send completes, arrive as they were; the caller's position and limit are untouched, and
     * a message over max-message-size fails without being sent. The connection says whether it sends in place.
     */
    @Test
    void aBufferSentInPlaceIsReadOnlyUntilItsSendCompletes() throws Exception {
        RdmaConnection serverSide = accepted.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        assertThat(connection.sendsInPlace()).isEqualTo(sendsInPlace());
        assertThat(serverSide.sendsInPlace()).isEqualTo(sendsInPlace());
        int size = config().maxMessageSize();
        int count = (int) Math.max(8, Math.min(48, (6L << 20) / size));
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int m = 0; m < count; m++) {
            ByteBuffer lent = numbered(ByteBuffer.allocateDirect(size), m);
            CompletableFuture<Void> f = connection.sendInPlace(lent, Runnable::run);
            assertThat(lent.position()).isZero();
            assertThat(lent.limit()).isEqualTo(size);
            sent.add(f.whenComplete((v, e) -> scramble(lent)));
        }
        assertNumberedMessages(serverSide, count, size, "read after its send completed");
        for (CompletableFuture<Void> f : sent) {
            await(f);
        }
        CompletableFuture<Void> tooLarge = connection.sendInPlace(ByteBuffer.allocate(size + 1), Runnable::run);
        assertThatThrownBy(() -> await(tooLarge)).hasCauseInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("max-message-size");
    }

    /**
     * Messages read into lent receive buffers arrive whole and in order, sent in runs held back for {@code more}, and
     * every lent buffer comes back: as a received message, or released once the connection ends with it unreceived.
     */
    @Test
    void messagesInLentBuffersArriveWholeAndEveryLentBufferComesBack() throws Exception {
        RdmaConnection serverSide = accepted.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        TrackingReceiveBuffers lender = new TrackingReceiveBuffers();
        serverSide.useReceiveBuffers(lender);
        int size = config().maxMessageSize();
        int count = 12;
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int m = 0; m < count; m++) {
            sent.add(connection.sendInPlace(numbered(ByteBuffer.allocateDirect(size), m), Runnable::run, m % 4 != 3));
        }
        for (int m = 0; m < count; m++) {
            ByteBuffer got = await(serverSide.receive());
            assertThat(got.remaining()).as("message %d", m).isEqualTo(size);
            assertThat(got.duplicate().mismatch(numbered(ByteBuffer.allocate(size), m))).as("message %d", m).isEqualTo(-1);
            assertThat(lender.takeBack(got)).as("message %d in a lent buffer", m).isEqualTo(readsIntoLentBuffers());
            await(sent.get(m));
        }
        for (int m = 0; m < 3; m++) {
            await(connection.send(numbered(ByteBuffer.allocate(100), m)));
        }
        connection.close();
        while (true) { // what the connection queued before it ended stays receivable: take it all
            CompletableFuture<ByteBuffer> next = serverSide.receive();
            try {
                lender.takeBack(await(next));
            } catch (Exception closed) {
                break;
            }
        }
        assertThat(lender.lent).as("lent buffers neither received nor released").isEmpty();
    }

    // ---- concurrency ----

    @Test
    void manyConnectionsWithManyOutstandingReadsReadCorrectData() throws Exception {
        int connections = 6;
        int readsPerConnection = 96;
        int size = 16 * 1024 + 5;
        RegisteredRegion remote = published(server, 1 << 20, Access.remoteRead());
        List<RdmaConnection> conns = new ArrayList<>();
        conns.add(connection);
        for (int i = 1; i < connections; i++) {
            conns.add(connect(client));
        }
        RegisteredRegion local = sink(client, (long) connections * readsPerConnection * size);
        List<CompletableFuture<Void>> all = new ArrayList<>();
        long[] offsets = new long[connections * readsPerConnection];
        Random random = new Random(3);
        List<Thread> issuers = new ArrayList<>();
        for (int c = 0; c < connections; c++) {
            for (int r = 0; r < readsPerConnection; r++) {
                offsets[c * readsPerConnection + r] = random.nextInt((1 << 20) - size);
            }
        }
        List<List<CompletableFuture<Void>>> perThread = new ArrayList<>();
        for (int c = 0; c < connections; c++) {
            int conn = c;
            List<CompletableFuture<Void>> mine = new ArrayList<>();
            perThread.add(mine);
            issuers.add(Thread.ofPlatform().start(() -> {
                for (int r = 0; r < readsPerConnection; r++) {
                    int slot = conn * readsPerConnection + r;
                    mine.add(conns.get(conn).read(remote.descriptor(), offsets[slot],
                            local.segment().asSlice((long) slot * size, size)));
                }
            }));
        }
        for (Thread t : issuers) {
            t.join();
        }
        perThread.forEach(all::addAll);
        await(CompletableFuture.allOf(all.toArray(CompletableFuture[]::new)));
        for (int slot = 0; slot < offsets.length; slot++) {
            assertPattern(local.segment().asSlice((long) slot * size, size), offsets[slot]);
        }
    }

    @Test
    void backPressureLetsManyMoreOperationsThanSlotsComplete() throws Exception {
        try (RdmaTransport limited = RdmaTransport.open(config().toBuilder().maxOutstandingOperations(2).build())) {
            RdmaConnection c = connect(limited);
            RegisteredRegion remote = published(server, 64 * 1024, Access.remoteRead());
            int reads = 200;
            RegisteredRegion local = sink(limited, reads * 256L);
            List<CompletableFuture<Void>> futures = new ArrayList<>();
            for (int i = 0; i < reads; i++) {
                futures.add(c.read(remote.descriptor(), i * 100L, local.segment().asSlice(i * 256L, 256)));
                assertThat(c.outstandingOperations()).isLessThanOrEqualTo(2);
            }
            await(CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)));
            for (int i = 0; i < reads; i++) {
                assertPattern(local.segment().asSlice(i * 256L, 256), i * 100L);
            }
            assertThat(limited.metrics().snapshot(OperationType.READ).successes()).isEqualTo(reads);
        }
    }

    // ---- failures ----

    @Test
    void peerClosingMidTransferFailsPendingOperationsWithConnectionClosed() throws Exception {
        long size = 16L << 20;
        RegisteredRegion remote = published(server, size, Access.remoteRead());
        int reads = 24;
        RegisteredRegion local = sink(client, size);
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        for (int i = 0; i < reads; i++) {
            futures.add(connection.read(remote.descriptor(), 0, local.segment()));
        }
        server.close();
        int closedFailures = 0;
        for (CompletableFuture<Void> f : futures) {
            try {
                await(f);
            } catch (ExecutionException e) {
                assertThat(e.getCause()).isInstanceOf(ConnectionClosedException.class);
                closedFailures++;
            }
        }
        assertThat(closedFailures).as("reads cut off by the peer closing").isPositive();
        eventually("the connection is closed", () -> !connection.isOpen());
        assertThat(failureOf(connection.read(remote.descriptor(), 0, local.segment().asSlice(0, 64))))
                .isInstanceOf(ConnectionClosedException.class);
        assertThat(failureOf(connection.receive())).isInstanceOf(ConnectionClosedException.class);
    }

    @Test
    void regionClosedWhileReadsAreInFlightEndsCleanly() throws Exception {
        long size = 8L << 20;
        RegisteredRegion remote = published(server, size, Access.remoteRead());
        int reads = 16;
        RegisteredRegion local = sink(client, size * reads);
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        for (int i = 0; i < reads; i++) {
            futures.add(connection.read(remote.descriptor(), 0, local.segment().asSlice(i * size, size)));
        }
        remote.close();
        for (int i = 0; i < reads; i++) {
            try {
                await(futures.get(i));
                assertPattern(local.segment().asSlice(i * size, size), 0);
            } catch (ExecutionException e) {
                // The first refused read closes the connection; reads still pending then fail as closed.
                Throwable cause = e.getCause();
                if (cause instanceof RemoteAccessException refused) {
                    if (reportsPreciseRefusalReasons()) {
                        assertThat(refused.reason())
                                .isIn(RemoteAccessException.Reason.UNKNOWN_KEY, RemoteAccessException.Reason.RESPONDER_ERROR);
                    }
                } else {
                    assertThat(cause).isInstanceOf(ConnectionClosedException.class);
                }
            }
        }
        // the responder still serves other regions (on a new connection if a refusal closed this one)
        if (!connection.isOpen()) {
            connection = connect(client);
        }
        RegisteredRegion other = published(server, 4096, Access.remoteRead());
        await(connection.read(other.descriptor(), 0, local.segment().asSlice(0, 4096)));
        assertPattern(local.segment().asSlice(0, 4096), 0);
    }

    @Test
    void sinkClosedWhileReadsAreInFlightIsNotWrittenAfterCloseReturns() throws Exception {
        long size = 2L << 20;
        RegisteredRegion remote = published(server, size, Access.remoteRead());
        int reads = 8;
        RegisteredRegion local = sink(client, size * reads);
        int regionsBefore = client.registeredRegions();
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        for (int i = 0; i < reads; i++) {
            futures.add(connection.read(remote.descriptor(), 0, local.segment().asSlice(i * size, size)));
        }
        // Each read pinned the sink, so close returns only once none of them can still land in it, and the
        // caller may reuse the memory at once.
        local.close();
        byte reused = 0x5A;
        local.segment().fill(reused);
        for (CompletableFuture<Void> f : futures) {
            try {
                await(f);
            } catch (ExecutionException e) {
                // a provider may refuse reads into a revoked sink; what matters is that nothing lands later
            }
        }
        long written = local.segment().mismatch(arena.allocate(local.segment().byteSize()).fill(reused));
        assertThat(written).as("first byte written into the sink after close returned").isEqualTo(-1);
        assertThat(local.isOpen()).isFalse();
        assertThat(client.registeredRegions()).isEqualTo(regionsBefore - 1);
        if (!connection.isOpen()) { // an RDMA NIC's refusal of the revoked sink ends the queue pair
            connection = connect(client);
        }
        assertThat(failureOf(connection.read(remote.descriptor(), 0, local.segment().asSlice(0, 64))))
                .as("a read into the closed sink").isInstanceOf(IllegalArgumentException.class);
        local.close(); // a second close is a no-op
    }

    @Test
    void closingTheTransportReleasesEverything() throws Exception {
        published(server, 4096, Access.remoteRead());
        sink(client, 4096);
        connect(client);
        eventually("the server saw both connections", () -> server.metrics().openConnections() == 2);
        assertThat(client.metrics().openConnections()).isEqualTo(2);
        assertThat(client.registeredRegions()).isEqualTo(1);
        client.close();
        assertThat(client.registeredRegions()).isZero();
        assertThat(client.metrics().registeredRegions()).isZero();
        assertThat(client.metrics().openConnections()).isZero();
        assertThat(connection.isOpen()).isFalse();
        eventually("the server noticed the peer left", () -> server.metrics().openConnections() == 0);
        server.close();
        assertThat(server.registeredRegions()).isZero();
        assertThat(server.metrics().registeredBytes()).isZero();
        assertThatThrownBy(() -> client.register(arena.allocate(64), Access.readSink())).isInstanceOf(ConnectionClosedException.class);
    }

    @Test
    void metricsCountOperationsBytesServedAndRejected() throws Exception {
        RegisteredRegion remote = published(server, 8192, Access.remoteReadWrite());
        RegisteredRegion local = sink(client, 8192);
        for (int i = 0; i < 5; i++) {
            await(connection.read(remote.descriptor(), 0, local.segment().asSlice(0, 1000)));
        }
        await(connection.write(remote.descriptor(), 0, local.segment().asSlice(0, 300)));
        RegionDescriptor d = remote.descriptor();
        RegionDescriptor forged = new RegionDescriptor(d.provider(), d.address(), d.length(), ~d.key(), d.access());
        refusedByPeerFailure(connection.read(forged, 0, local.segment().asSlice(0, 10)));

        var reads = client.metrics().snapshot(OperationType.READ);
        assertThat(reads.count()).isEqualTo(6);
        assertThat(reads.errors()).isEqualTo(1);
        assertThat(reads.bytes()).isEqualTo(5000);
        var writes = client.metrics().snapshot(OperationType.WRITE);
        assertThat(writes.successes()).isEqualTo(1);
        assertThat(writes.bytes()).isEqualTo(300);
        assertThat(client.metrics().inFlight()).isZero();
        if (countsResponderWork()) {
            assertThat(server.metrics().servedBytes(OperationType.READ)).isEqualTo(5000);
            assertThat(server.metrics().servedOperations(OperationType.READ)).isEqualTo(5);
            assertThat(server.metrics().servedBytes(OperationType.WRITE)).isEqualTo(300);
            assertThat(server.metrics().rejectedRequests()).isEqualTo(1);
        }
        assertThat(server.metrics().registeredRegions()).isEqualTo(1);
        assertThat(server.metrics().registeredBytes()).isEqualTo(8192);
    }

    // ---- requests and replies ----

    private static final int ECHO = RequestTypes.FIRST_APPLICATION_TYPE;
    private static final int DEFERRED = RequestTypes.FIRST_APPLICATION_TYPE + 1;
    private static final int FAILING = RequestTypes.FIRST_APPLICATION_TYPE + 2;
    private static final int REFUSING = RequestTypes.FIRST_APPLICATION_TYPE + 3;
    private static final int OVERSIZED = RequestTypes.FIRST_APPLICATION_TYPE + 4;
    private static final int SILENT = RequestTypes.FIRST_APPLICATION_TYPE + 5;

    /** Requests of type DEFERRED wait here until the test answers them. */
    protected final BlockingQueue<CompletableFuture<ByteBuffer>> deferred = new LinkedBlockingQueue<>();
    protected final AtomicReference<Peer> lastPeer = new AtomicReference<>();

    private RequestHandlers testHandlers() {
        return RequestHandlers
                .of(ECHO, RequestHandler.answering((body, context) -> {
                    lastPeer.set(context.peer());
                    return body;
                }))
                .and(DEFERRED, (body, context) -> {
                    CompletableFuture<ByteBuffer> answer = new CompletableFuture<>();
                    deferred.add(answer);
                    return answer.thenApply(ignored -> body);
                })
                .and(FAILING, (body, context) -> {
                    throw new IllegalStateException("secret internals");
                })
                .and(REFUSING, (body, context) -> CompletableFuture.failedFuture(new RequestRefusedException("no such thing here")))
                .and(OVERSIZED, RequestHandler.answering((body, context) -> ByteBuffer.allocate(config().maxMessageSize() + 1)))
                .and(SILENT, (body, context) -> new CompletableFuture<>());
    }

    /** A connection from {@code from} to a listener of {@link #server} that serves the test's request types. */
    protected RdmaConnection connectToHandlers(RdmaTransport from, BlockingQueue<RdmaConnection> acceptedHere) throws Exception {
        RdmaListener serving = server.listen(listenAddress(), testHandlers(), acceptedHere::add);
        return from.connect(serving.localAddress()).get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    private static ByteBuffer text(String s) {
        return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
    }

    private static String text(ByteBuffer b) {
        return StandardCharsets.UTF_8.decode(b).toString();
    }

    @Test
    void requestRoundTripsUpToTheMaxSizeAndTheHandlerSeesThePeer() throws Exception {
        RdmaConnection c = connectToHandlers(client, new LinkedBlockingQueue<>());
        assertThat(text(await(c.request(ECHO, text("hello"))))).isEqualTo("hello");
        Peer peer = lastPeer.get();
        assertThat(peer.address().getAddress()).isEqualTo(c.localAddress().getAddress());
        assertThat(peer.provider()).isEqualTo(expectedProvider());
        assertThat(peer.principal()).isEqualTo(expectedPrincipal());

        byte[] big = new byte[config().maxMessageSize()];
        new Random(11).nextBytes(big);
        ByteBuffer reply = await(c.request(ECHO, big));
        byte[] copy = new byte[reply.remaining()];
        reply.get(copy);
        assertThat(copy).isEqualTo(big);
        assertThat(text(c.requestAndWait(ECHO, text("")))).isEmpty();
        assertThat(c.outstandingOperations()).isZero();
    }

    @Test
    void manyRequestsInFlightGetTheirOwnRepliesInAnotherOrder() throws Exception {
        RdmaConnection c = connectToHandlers(client, new LinkedBlockingQueue<>());
        int count = 64;
        List<CompletableFuture<ByteBuffer>> replies = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            replies.add(c.request(DEFERRED, text("request " + i)));
        }
        List<CompletableFuture<ByteBuffer>> answers = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            CompletableFuture<ByteBuffer> a = deferred.poll(WAIT_SECONDS, TimeUnit.SECONDS);
            assertThat(a).as("request " + i + " reached its handler").isNotNull();
            answers.add(a);
        }
        assertThat(c.outstandingOperations()).isEqualTo(count);
        for (int i = count - 1; i >= 0; i--) {
            answers.get(i).complete(null);
        }
        for (int i = 0; i < count; i++) {
            assertThat(text(await(replies.get(i)))).isEqualTo("request " + i);
        }
        assertThat(c.outstandingOperations()).isZero();
    }

    @Test
    void errorRepliesCarryTheStatusAndASafeReasonAndKeepTheConnection() throws Exception {
        RdmaConnection c = connectToHandlers(client, new LinkedBlockingQueue<>());
        Throwable refused = failureOf(c.request(REFUSING, text("x")));
        assertThat(refused).isInstanceOf(RemoteRequestException.class).hasMessageContaining("no such thing here");
        assertThat(((RemoteRequestException) refused).status()).isEqualTo(RemoteRequestException.Status.REFUSED);
        assertThat(((RemoteRequestException) refused).reason()).isEqualTo("no such thing here");

        Throwable failed = failureOf(c.request(FAILING, text("x")));
        assertThat(failed).isInstanceOf(RemoteRequestException.class).hasMessageContaining("IllegalStateException")
                .hasMessageNotContaining("secret internals");
        assertThat(((RemoteRequestException) failed).status()).isEqualTo(RemoteRequestException.Status.HANDLER_FAILED);

        Throwable tooLarge = failureOf(c.request(OVERSIZED, text("x")));
        assertThat(tooLarge).isInstanceOf(RemoteRequestException.class).hasMessageContaining("max-message-size");
        assertThat(((RemoteRequestException) tooLarge).status()).isEqualTo(RemoteRequestException.Status.TOO_LARGE);

        assertThat(c.isOpen()).isTrue();
        assertThat(text(await(c.request(ECHO, text("still here"))))).isEqualTo("still here");
    }

    @Test
    void requestsOfUnknownTypesAreAnsweredAsUnknownInBothDirections() throws Exception {
        BlockingQueue<RdmaConnection> acceptedHere = new LinkedBlockingQueue<>();
        RdmaConnection c = connectToHandlers(client, acceptedHere);
        Throwable unknown = failureOf(c.request(RequestTypes.FIRST_APPLICATION_TYPE + 99, text("x")));
        assertThat(unknown).isInstanceOf(RemoteRequestException.class).hasMessageContaining("0x10063");
        assertThat(((RemoteRequestException) unknown).status()).isEqualTo(RemoteRequestException.Status.UNKNOWN_TYPE);
        // The connecting side installed no handlers: the listener's side gets the same answer.
        RdmaConnection serverSide = acceptedHere.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        Throwable back = failureOf(serverSide.request(ECHO, text("x")));
        assertThat(((RemoteRequestException) back).status()).isEqualTo(RemoteRequestException.Status.UNKNOWN_TYPE);
        assertThat(c.isOpen()).isTrue();
    }

    @Test
    void oversizedRequestIsRefusedLocally() throws Exception {
        RdmaConnection c = connectToHandlers(client, new LinkedBlockingQueue<>());
        assertThat(failureOf(c.request(ECHO, new byte[config().maxMessageSize() + 1])))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("max-message-size " + config().maxMessageSize());
        assertThat(c.outstandingOperations()).isZero();
        assertThat(text(await(c.request(ECHO, text("fine"))))).isEqualTo("fine");
    }

    @Test
    void requestToAHandlerThatNeverAnswersTimesOutAndClosesTheConnection() throws Exception {
        try (RdmaTransport impatient = RdmaTransport.open(config().toBuilder().operationTimeout(java.time.Duration.ofSeconds(1)).build())) {
            RdmaConnection c = connectToHandlers(impatient, new LinkedBlockingQueue<>());
            long start = System.nanoTime();
            assertThat(failureOf(c.request(SILENT, text("x")))).isInstanceOf(RdmaTimeoutException.class)
                    .hasMessageContaining("no reply within");
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isGreaterThanOrEqualTo(900);
            eventually("the connection is closed", () -> !c.isOpen());
            assertThat(c.outstandingOperations()).isZero();
            assertThat(failureOf(c.request(ECHO, text("x")))).isInstanceOf(RdmaTimeoutException.class);
        }
    }

    @Test
    void closingTheConnectionFailsPendingRequests() throws Exception {
        RdmaConnection c = connectToHandlers(client, new LinkedBlockingQueue<>());
        List<CompletableFuture<ByteBuffer>> pending = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            pending.add(c.request(SILENT, text("x")));
        }
        eventually("the requests are in flight", () -> c.outstandingOperations() == 5);
        c.close();
        for (CompletableFuture<ByteBuffer> p : pending) {
            assertThat(failureOf(p)).isInstanceOf(ConnectionClosedException.class);
        }
        assertThat(c.outstandingOperations()).isZero();
        assertThat(failureOf(c.request(ECHO, text("x")))).isInstanceOf(ConnectionClosedException.class);
    }

    @Test
    void plainMessagesStillFlowOnAConnectionThatCarriesRequests() throws Exception {
        BlockingQueue<RdmaConnection> acceptedHere = new LinkedBlockingQueue<>();
        RdmaConnection c = connectToHandlers(client, acceptedHere);
        RdmaConnection serverSide = acceptedHere.poll(WAIT_SECONDS, TimeUnit.SECONDS);
        assertThat(serverSide).isNotNull();
        List<CompletableFuture<ByteBuffer>> replies = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            c.send(text("message " + i));
            replies.add(c.request(ECHO, text("request " + i)));
        }
        for (int i = 0; i < 100; i++) {
            assertThat(text(await(serverSide.receive()))).isEqualTo("message " + i);
            assertThat(text(await(replies.get(i)))).isEqualTo("request " + i);
        }
        await(serverSide.send(text("back")));
        assertThat(text(await(c.receive()))).isEqualTo("back");
    }
}
