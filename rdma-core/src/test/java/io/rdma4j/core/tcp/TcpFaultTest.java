package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredMemoryLimitException;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The tcp responder and requester facing a misbehaving peer driven by hand over a raw socket. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpFaultTest {

    private static final InetSocketAddress LOOPBACK = new InetSocketAddress("127.0.0.1", 0);

    private Arena arena;
    private RdmaTransport server;
    private RdmaListener listener;
    private RegisteredRegion published;

    @BeforeEach
    void setUp() {
        arena = Arena.ofShared();
        server = RdmaTransport.open(tcp(b -> { }));
        listener = server.listen(LOOPBACK);
        MemorySegment s = arena.allocate(4096, 64);
        for (int i = 0; i < 4096; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) i);
        }
        published = server.register(s, Access.remoteRead());
    }

    @AfterEach
    void tearDown() {
        server.close();
        arena.close();
    }

    private static TransportConfig tcp(Consumer<TransportConfig.Builder> custom) {
        TransportConfig.Builder b = TransportConfig.builder().provider("tcp");
        custom.accept(b);
        return b.build();
    }

    private RawPeer handshaken() throws Exception {
        RawPeer peer = RawPeer.connect(listener.localAddress());
        TcpFrameCodec.Hello hello = peer.handshake(TcpFrameCodec.VERSION);
        assertThat(hello.wantsAuth()).isFalse();
        return peer;
    }

    /** A regular client still reads correct data: the responder survived whatever came before. */
    private void assertResponderStillServes() throws Exception {
        try (RdmaTransport client = RdmaTransport.open(tcp(b -> { }))) {
            RegisteredRegion sink = client.register(arena.allocate(4096), Access.readSink());
            RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
            c.read(published.descriptor(), 0, sink.segment()).get(10, TimeUnit.SECONDS);
            for (int i = 0; i < 4096; i++) {
                assertThat(sink.segment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) i);
            }
        }
    }

    private void assertRejectedAndClosed(RawPeer peer, long rejectedBefore) throws Exception {
        assertThat(peer.closedByPeer()).as("responder closed the misbehaving connection").isTrue();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (server.metrics().rejectedRequests() == rejectedBefore && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(server.metrics().rejectedRequests()).isGreaterThan(rejectedBefore);
        assertResponderStillServes();
    }

    private static byte[] header(int type, int flags, int reserved, int length, long id) {
        return ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE).put((byte) type).put((byte) flags).putShort((short) reserved)
                .putInt(length).putLong(id).array();
    }

    // ---- registered memory that goes away ----

    /**
     * A file registered with {@code registerFile} and then truncated in place (as a Kafka follower truncates its log):
     * reading what is left still works; a READ past the new end faults in the responder, which ends that connection
     * (plain tcp: the kernel's copy fails; TLS: the JVM's copy faults) and nothing else.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"plain", "tls"})
    void aFileTruncatedUnderItsRegistrationEndsOnlyTheConnectionReadingPastItsEnd(String security, @TempDir Path dir) throws Exception {
        Consumer<TransportConfig.Builder> secured = security.equals("tls")
                ? b -> b.providerOption("tcp.tls", "true").providerOption("tcp.tls.authentication", "shared-secret")
                        .sharedSecret("a truncation test secret of 16+ bytes")
                : b -> { };
        Path file = dir.resolve("00000000000000000000.log");
        byte[] content = new byte[64 * 1024];
        for (int i = 0; i < content.length; i++) {
            content[i] = (byte) (i * 31);
        }
        Files.write(file, content);
        try (RdmaTransport mapping = RdmaTransport.open(tcp(secured));
             RdmaTransport client = RdmaTransport.open(tcp(secured))) {
            RdmaListener at = mapping.listen(LOOPBACK);
            RegisteredRegion region = mapping.registerFile(file, content.length, arena);
            try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
                ch.truncate(4096);
            }
            MemorySegment sink = client.register(arena.allocate(content.length), Access.readSink()).segment();
            RdmaConnection c = client.connect(at.localAddress()).get(10, TimeUnit.SECONDS);
            c.read(region.descriptor(), 0, sink.asSlice(0, 4096)).get(10, TimeUnit.SECONDS);
            assertThat(sink.asSlice(0, 4096).toArray(ValueLayout.JAVA_BYTE)).isEqualTo(java.util.Arrays.copyOf(content, 4096));

            assertThatThrownBy(() -> c.read(region.descriptor(), 16384, sink.asSlice(0, 8192)).get(10, TimeUnit.SECONDS))
                    .as("a READ of pages past the truncated end").isInstanceOf(ExecutionException.class)
                    .cause().isInstanceOf(ConnectionClosedException.class);
            RdmaConnection again = client.connect(at.localAddress()).get(10, TimeUnit.SECONDS);
            again.read(region.descriptor(), 0, sink.asSlice(0, 4096)).get(10, TimeUnit.SECONDS);
            assertThat(sink.asSlice(0, 4096).toArray(ValueLayout.JAVA_BYTE)).as("the responder still serves what is left")
                    .isEqualTo(java.util.Arrays.copyOf(content, 4096));
        }
    }

    /**
     * {@code tcp.max-registered-bytes} bounds what the live regions span together, as RLIMIT_MEMLOCK bounds what verbs
     * pins: a registration past it (a file's too) is refused with a {@link RegisteredMemoryLimitException} that names
     * the setting, and a closed region makes room again.
     */
    @Test
    void registrationsPastTheRegisteredMemoryLimitAreRefusedUntilRegionsClose(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("map-output.data");
        Files.write(file, new byte[8192]);
        try (RdmaTransport t = RdmaTransport.open(tcp(b -> b.providerOption("tcp.max-registered-bytes", "16k")))) {
            RegisteredRegion first = t.register(arena.allocate(12 * 1024), Access.remoteRead());
            assertThatThrownBy(() -> t.registerFile(file, 8192, arena)).isInstanceOf(RegisteredMemoryLimitException.class)
                    .hasMessageContaining("tcp.max-registered-bytes=16384").hasMessageContaining("20480 bytes");
            RegisteredRegion second = t.register(arena.allocate(4096), Access.remoteRead());
            assertThat(t.registeredRegions()).isEqualTo(2);
            first.close();
            RegisteredRegion mapped = t.registerFile(file, 8192, arena);
            assertThat(mapped.segment().byteSize()).isEqualTo(8192);
            second.close();
            mapped.close();
            assertThat(t.registeredRegions()).isZero();
        }
    }

    // ---- malformed input ----

    @Test
    void unknownFrameTypeClosesOnlyThatConnection() throws Exception {
        long before = server.metrics().rejectedRequests();
        try (RawPeer peer = handshaken()) {
            peer.send(header(77, 0, 0, 0, 1));
            assertRejectedAndClosed(peer, before);
        }
    }

    @Test
    void reservedBitsAndWrongLengthsAreMalformed() throws Exception {
        long before = server.metrics().rejectedRequests();
        try (RawPeer peer = handshaken()) {
            peer.send(header(TcpFrameCodec.READ_DONE, 0, 7, 0, 1));
            assertRejectedAndClosed(peer, before);
        }
        before = server.metrics().rejectedRequests();
        try (RawPeer peer = handshaken()) {
            peer.send(header(TcpFrameCodec.READ_REQ, 0, 0, 23, 1));
            assertRejectedAndClosed(peer, before);
        }
    }

    @Test
    void truncatedFramesEndTheConnectionWithoutHarm() throws Exception {
        try (RawPeer peer = handshaken()) {
            peer.send(new byte[] {TcpFrameCodec.READ_REQ, 0, 0});
            peer.socket.shutdownOutput();
            assertThat(peer.closedByPeer()).isTrue();
        }
        try (RawPeer peer = handshaken()) {
            peer.send(header(TcpFrameCodec.READ_REQ, 0, 0, 24, 1));
            peer.send(new byte[10]);
            peer.socket.shutdownOutput();
            assertThat(peer.closedByPeer()).isTrue();
        }
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.send(new byte[] {0x52, 0x34});
            peer.socket.shutdownOutput();
            assertThat(peer.closedByPeer()).isTrue();
        }
        assertResponderStillServes();
    }

    @Test
    void oversizedFramesAreRefusedBeforeAllocating() throws Exception {
        long before = server.metrics().rejectedRequests();
        try (RawPeer peer = handshaken()) {
            peer.send(header(TcpFrameCodec.SEND, 0, 0, Integer.MAX_VALUE, 0));
            assertRejectedAndClosed(peer, before);
        }
        before = server.metrics().rejectedRequests();
        try (RawPeer peer = handshaken()) {
            peer.send(header(TcpFrameCodec.SEND, 0, 0, -1, 0));
            assertRejectedAndClosed(peer, before);
        }
        before = server.metrics().rejectedRequests();
        try (RawPeer peer = handshaken()) {
            peer.send(header(TcpFrameCodec.WRITE_DATA, 0, 0, TcpFrameCodec.MAX_DATA_CHUNK + 1, 5));
            assertRejectedAndClosed(peer, before);
        }
    }

    @Test
    void unknownVersionOrMagicIsRefusedByTheListener() throws Exception {
        long before = server.metrics().rejectedRequests();
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.sendHello((short) 99);
            peer.readHello();
            assertRejectedAndClosed(peer, before);
        }
        before = server.metrics().rejectedRequests();
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012345".getBytes());
            assertRejectedAndClosed(peer, before);
        }
    }

    @Test
    void connectingToAPeerOfAnotherVersionFailsWithProtocolException() throws Exception {
        try (ServerSocket fake = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             RdmaTransport client = RdmaTransport.open(tcp(b -> { }))) {
            Thread.ofVirtual().start(() -> {
                try (RawPeer peer = new RawPeer(fake.accept())) {
                    peer.sendHello((short) 99);
                    peer.closedByPeer();
                } catch (Exception ignored) {
                    // the test asserts on the client side
                }
            });
            Throwable t = failure(client.connect(new InetSocketAddress(fake.getInetAddress(), fake.getLocalPort())));
            assertThat(t).isInstanceOf(ProtocolException.class).hasMessageContaining("version 99").hasMessageContaining("speaks 1");
        }
    }

    // ---- refused requests on a live connection ----

    @Test
    void forgedKeyIsAnsweredWithAnErrorAndTheConnectionKeepsServing() throws Exception {
        RegionDescriptor d = published.descriptor();
        long before = server.metrics().rejectedRequests();
        try (RawPeer peer = handshaken()) {
            peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 1, d.address(), 64, d.key() + 1));
            TcpFrameCodec.Frame f = peer.readFrame(null);
            assertThat(f).isEqualTo(new TcpFrameCodec.Error(1, RemoteAccessException.Reason.UNKNOWN_KEY,
                    ((TcpFrameCodec.Error) f).message()));
            // a refused write's data is drained, not applied, and the stream stays in sync
            peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.WRITE_REQ, 2, d.address(), 100, d.key()));
            peer.send(ByteBuffer.wrap(header(TcpFrameCodec.WRITE_DATA, 0, 0, 100, 2)), ByteBuffer.allocate(100));
            TcpFrameCodec.Frame w = peer.readFrame(null);
            assertThat(w).isInstanceOf(TcpFrameCodec.Error.class);
            assertThat(((TcpFrameCodec.Error) w).reason()).isEqualTo(RemoteAccessException.Reason.ACCESS_DENIED);
            peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 3, d.address() + 10, 20, d.key()));
            ByteBuffer data = ByteBuffer.allocate(20);
            assertThat(peer.readFrame(data)).isEqualTo(new TcpFrameCodec.Data(TcpFrameCodec.READ_DATA, 3, 20));
            assertThat(peer.readFrame(null)).isEqualTo(new TcpFrameCodec.Done(TcpFrameCodec.READ_DONE, 3));
            for (int i = 0; i < 20; i++) {
                assertThat(data.get(i)).isEqualTo((byte) (10 + i));
            }
        }
        assertThat(server.metrics().rejectedRequests()).isEqualTo(before + 2);
        assertThat(published.segment().get(ValueLayout.JAVA_BYTE, 0)).isZero();
    }

    @Test
    void requestsLongerThanTheRespondersLimitAreTooLarge() throws Exception {
        try (RdmaTransport small = RdmaTransport.open(tcp(b -> b.providerOption("tcp.max-request-bytes", "4096")));
             RdmaTransport client = RdmaTransport.open(tcp(b -> { }))) {
            RdmaListener l = small.listen(LOOPBACK);
            RegisteredRegion big = small.register(arena.allocate(16384), Access.remoteRead());
            RegisteredRegion sink = client.register(arena.allocate(16384), Access.readSink());
            RdmaConnection c = client.connect(l.localAddress()).get(10, TimeUnit.SECONDS);
            Throwable t = failure(c.read(big.descriptor(), 0, sink.segment().asSlice(0, 8192)));
            assertThat(t).isInstanceOf(RemoteAccessException.class);
            assertThat(((RemoteAccessException) t).reason()).isEqualTo(RemoteAccessException.Reason.TOO_LARGE);
            // The refusal closed that connection (as on a NIC); a request within the limit works on a new one.
            RdmaConnection again = client.connect(l.localAddress()).get(10, TimeUnit.SECONDS);
            again.read(big.descriptor(), 0, sink.segment().asSlice(0, 4096)).get(10, TimeUnit.SECONDS);
            assertThat(small.metrics().rejectedRequests()).isEqualTo(1);
        }
    }

    @Test
    void deregisteringARegionAPeerDoesNotDrainClosesThatPeerInsteadOfHanging() throws Exception {
        long size = 64L << 20;
        try (RdmaTransport responder = RdmaTransport.open(tcp(b -> b.providerOption("tcp.region-close-timeout", "300ms")))) {
            RdmaListener l = responder.listen(LOOPBACK);
            RegisteredRegion big = responder.register(arena.allocate(size), Access.remoteRead());
            try (RawPeer peer = RawPeer.connect(l.localAddress())) {
                peer.handshake(TcpFrameCodec.VERSION);
                peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 1, big.descriptor().address(), size, big.descriptor().key()));
                // the peer reads nothing: the responder's writer blocks once the socket buffers are full
                Thread.sleep(200);
                big.close();
                assertThat(big.isOpen()).isFalse();
                assertThat(peer.closedByPeer()).as("the stuck connection was closed").isTrue();
            }
            assertThat(responder.registeredRegions()).isZero();
        }
    }

    // ---- authentication ----

    @Test
    void sharedSecretLetsMatchingPeersIn() throws Exception {
        try (RdmaTransport a = RdmaTransport.open(tcp(b -> b.sharedSecret("correct horse battery")));
             RdmaTransport b = RdmaTransport.open(tcp(c -> c.sharedSecret("correct horse battery")))) {
            RdmaListener l = a.listen(LOOPBACK);
            RegisteredRegion r = a.register(arena.allocate(64), Access.remoteRead());
            RegisteredRegion sink = b.register(arena.allocate(64), Access.readSink());
            RdmaConnection c = b.connect(l.localAddress()).get(10, TimeUnit.SECONDS);
            c.read(r.descriptor(), 0, sink.segment()).get(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void wrongOrMissingSecretIsRefusedOnBothSides() throws Exception {
        try (RdmaTransport guarded = RdmaTransport.open(tcp(b -> b.sharedSecret("correct horse battery")));
             RdmaTransport wrong = RdmaTransport.open(tcp(b -> b.sharedSecret("incorrect horse battery")));
             RdmaTransport none = RdmaTransport.open(tcp(b -> { }))) {
            RdmaListener l = guarded.listen(LOOPBACK);
            long before = guarded.metrics().rejectedRequests();
            assertThat(failure(wrong.connect(l.localAddress()))).isInstanceOf(AuthenticationException.class)
                    .hasMessageContaining("shared secret");
            assertThat(failure(none.connect(l.localAddress()))).isInstanceOf(AuthenticationException.class)
                    .hasMessageContaining("requires a shared secret");
            // a peer demanding a secret that this listener does not have is refused by the connecting side
            assertThat(failure(guarded.connect(listener.localAddress()))).isInstanceOf(AuthenticationException.class)
                    .hasMessageContaining("no shared secret");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (guarded.metrics().rejectedRequests() < before + 2 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertThat(guarded.metrics().rejectedRequests()).isGreaterThanOrEqualTo(before + 2);
            assertThat(guarded.metrics().openConnections()).isZero();
        }
        assertResponderStillServes();
    }

    // ---- malformed message headers (the transport's control channel) ----

    /** A SEND frame whose message is {@code message}: the raw peer writes the transport's header itself. */
    private static ByteBuffer sendFrame(ByteBuffer message) {
        ByteBuffer frame = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE + message.remaining());
        TcpFrameCodec.putHeader(frame, TcpFrameCodec.SEND, message.remaining(), 0);
        return frame.put(message).flip();
    }

    private static ByteBuffer messageHeader(int version, int kind, int status, int reserved, int type, long correlationId) {
        return ByteBuffer.allocate(16).put((byte) version).put((byte) kind).put((byte) status).put((byte) reserved)
                .putInt(type).putLong(correlationId).flip();
    }

    @Test
    void malformedMessageHeadersCloseTheConnectionAsProtocolViolations() throws Exception {
        List<ByteBuffer> malformed = List.of(
                ByteBuffer.allocate(15),                              // shorter than the header
                messageHeader(2, 1, 0, 0, 0, 0),                      // another header version
                messageHeader(1, 7, 0, 0, 0, 0),                      // unknown kind
                messageHeader(1, 1, 0, 3, 0, 0),                      // reserved byte set
                messageHeader(1, 1, 0, 0, 0, 12),                     // plain message with a correlation id
                messageHeader(1, 2, 4, 0, 0x10000, 1),                // request with a status
                messageHeader(1, 3, 0, 0, 0x10000, 77),               // reply to a request never sent
                messageHeader(1, 3, 99, 0, 0x10000, 77));             // reply with an unknown status
        for (ByteBuffer message : malformed) {
            long before = server.metrics().rejectedRequests();
            try (RawPeer peer = handshaken()) {
                peer.send(sendFrame(message));
                assertRejectedAndClosed(peer, before);
            }
        }
    }

    @Test
    void requestAnsweredWithAMalformedReplyFailsWithProtocolExceptionInsteadOfHanging() throws Exception {
        for (ByteBuffer reply : List.of(messageHeader(9, 3, 0, 0, 0x10000, 1), messageHeader(1, 3, 0, 0, 0x10000, 999),
                messageHeader(1, 3, 0, 0, 0x10001, 1))) {
            try (ServerSocket liar = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                 RdmaTransport client = RdmaTransport.open(tcp(b -> { }))) {
                CompletableFuture<RawPeer> accepted = acceptHandshaken(liar);
                RdmaConnection c = client.connect(address(liar)).get(10, TimeUnit.SECONDS);
                CompletableFuture<ByteBuffer> request = c.request(0x10000, new byte[] {1, 2, 3});
                RawPeer peer = accepted.get(10, TimeUnit.SECONDS);
                TcpFrameCodec.Message sent = (TcpFrameCodec.Message) peer.readFrame(null);
                ByteBuffer header = sent.payload();
                assertThat(header.get(0)).as("header version").isEqualTo((byte) 1);
                assertThat(header.get(1)).as("request kind").isEqualTo((byte) 2);
                assertThat(header.getInt(4)).as("type").isEqualTo(0x10000);
                assertThat(header.getLong(8)).as("first correlation id").isEqualTo(1L);
                peer.send(sendFrame(reply));
                assertThat(failure(request)).isInstanceOf(ConnectionClosedException.class)
                        .hasCauseInstanceOf(ProtocolException.class);
                assertThat(c.isOpen()).isFalse();
                assertThat(c.outstandingOperations()).isZero();
                assertThat(peer.closedByPeer()).isTrue();
                peer.close();
            }
        }
    }

    @Test
    void aFloodOfRequestsBeyondTheLimitGetsBusyRepliesAndTheConnectionKeepsServing() throws Exception {
        CompletableFuture<ByteBuffer> never = new CompletableFuture<>();
        try (RdmaTransport limited = RdmaTransport.open(tcp(b -> b.maxOutstandingOperations(4)))) {
            RdmaListener serving = limited.listen(LOOPBACK, io.rdma4j.core.RequestHandlers.of(0x10000, (body, context) -> never)
                    .and(0x10001, io.rdma4j.core.RequestHandler.answering((body, context) -> body)));
            try (RawPeer peer = RawPeer.connect(serving.localAddress())) {
                peer.handshake(TcpFrameCodec.VERSION);
                for (int i = 1; i <= 6; i++) {
                    peer.send(sendFrame(messageHeader(1, 2, 0, 0, 0x10000, i)));
                }
                List<Long> busy = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    ByteBuffer reply = ((TcpFrameCodec.Message) peer.readFrame(null)).payload();
                    assertThat(reply.get(1)).as("reply kind").isEqualTo((byte) 3);
                    assertThat(reply.get(2)).as("status BUSY").isEqualTo((byte) (io.rdma4j.core.RemoteRequestException.Status.BUSY.ordinal() + 1));
                    busy.add(reply.getLong(8));
                }
                assertThat(busy).containsExactlyInAnyOrder(5L, 6L);
                never.complete(ByteBuffer.wrap(new byte[] {42}));
                for (int i = 0; i < 4; i++) {
                    ByteBuffer reply = ((TcpFrameCodec.Message) peer.readFrame(null)).payload();
                    assertThat(reply.get(2)).as("status OK").isZero();
                    assertThat(reply.get(16)).isEqualTo((byte) 42);
                }
                peer.send(sendFrame(ByteBuffer.allocate(17).put(messageHeader(1, 2, 0, 0, 0x10001, 7)).put((byte) 5).flip()));
                ByteBuffer echo = ((TcpFrameCodec.Message) peer.readFrame(null)).payload();
                assertThat(echo.getLong(8)).isEqualTo(7L);
                assertThat(echo.get(16)).isEqualTo((byte) 5);
            }
        }
    }

    // ---- unresponsive or broken responders ----

    @Test
    void readFromAPeerThatNeverAnswersTimesOutAndClosesTheConnection() throws Exception {
        try (ServerSocket silent = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             RdmaTransport client = RdmaTransport.open(tcp(b -> b.operationTimeout(Duration.ofMillis(500))))) {
            CompletableFuture<RawPeer> accepted = acceptHandshaken(silent);
            RdmaConnection c = client.connect(address(silent)).get(10, TimeUnit.SECONDS);
            RegisteredRegion sink = client.register(arena.allocate(64), Access.readSink());
            RegionDescriptor remote = new RegionDescriptor("tcp", 0x1000, 64, 42, Access.remoteRead());
            assertThat(failure(c.read(remote, 0, sink.segment()))).isInstanceOf(RdmaTimeoutException.class);
            assertThat(c.isOpen()).isFalse();
            assertThat(accepted.get(10, TimeUnit.SECONDS).closedByPeer()).isTrue();
            accepted.get().close();
        }
    }

    @Test
    void readAllFromAPeerThatNeverAnswersTimesOutOnceAndGivesEverySlotBack() throws Exception {
        try (ServerSocket silent = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             RdmaTransport client = RdmaTransport.open(tcp(b -> b.operationTimeout(Duration.ofMillis(500))))) {
            CompletableFuture<RawPeer> accepted = acceptHandshaken(silent);
            RdmaConnection c = client.connect(address(silent)).get(10, TimeUnit.SECONDS);
            RegisteredRegion sink = client.register(arena.allocate(64 * 8), Access.readSink());
            RegionDescriptor remote = new RegionDescriptor("tcp", 0x1000, 64, 42, Access.remoteRead());
            List<ReadRequest> reads = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                reads.add(new ReadRequest(remote, 0, sink.segment().asSlice(i * 64L, 64)));
            }
            // one group: one timer for all eight reads
            assertThat(failure(c.readAll(reads))).isInstanceOf(RdmaTimeoutException.class)
                    .hasMessageContaining("8 reads of 512 bytes");
            assertThat(c.isOpen()).isFalse();
            assertThat(c.outstandingOperations()).isZero();
            assertThat(client.metrics().inFlight()).isZero();
            assertThat(accepted.get(10, TimeUnit.SECONDS).closedByPeer()).isTrue();
            accepted.get().close();
        }
    }

    @Test
    void readAndWaitOnAPeerThatNeverAnswersTimesOutAndClosesTheConnection() throws Exception {
        try (ServerSocket silent = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             RdmaTransport client = RdmaTransport.open(tcp(b -> b.operationTimeout(Duration.ofMillis(500))))) {
            CompletableFuture<RawPeer> accepted = acceptHandshaken(silent);
            RdmaConnection c = client.connect(address(silent)).get(10, TimeUnit.SECONDS);
            RegisteredRegion sink = client.register(arena.allocate(64), Access.readSink());
            RegionDescriptor remote = new RegionDescriptor("tcp", 0x1000, 64, 42, Access.remoteRead());
            assertThatThrownBy(() -> c.readAndWait(remote, 0, sink.segment())).isInstanceOf(RdmaTimeoutException.class);
            assertThat(c.isOpen()).isFalse();
            assertThat(c.outstandingOperations()).isZero();
            assertThat(accepted.get(10, TimeUnit.SECONDS).closedByPeer()).isTrue();
            accepted.get().close();
        }
    }

    @Test
    void handshakeWithAPeerThatSaysNothingTimesOut() throws Exception {
        try (ServerSocket mute = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             RdmaTransport client = RdmaTransport.open(tcp(b -> b.connectTimeout(Duration.ofMillis(300))))) {
            CompletableFuture<Socket> held = CompletableFuture.supplyAsync(() -> {
                try {
                    return mute.accept();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            assertThat(failure(client.connect(address(mute)))).isInstanceOf(RdmaTimeoutException.class);
            held.get(10, TimeUnit.SECONDS).close();
        }
    }

    @Test
    void peerSendingMoreDataThanAskedIsAProtocolViolation() throws Exception {
        try (ServerSocket liar = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             RdmaTransport client = RdmaTransport.open(tcp(b -> { }))) {
            CompletableFuture<RawPeer> accepted = acceptHandshaken(liar);
            RdmaConnection c = client.connect(address(liar)).get(10, TimeUnit.SECONDS);
            RegisteredRegion sink = client.register(arena.allocate(128), Access.readSink());
            MemorySegment target = sink.segment().asSlice(0, 64);
            CompletableFuture<Void> read = c.read(new RegionDescriptor("tcp", 0x1000, 64, 42, Access.remoteRead()), 0, target);
            RawPeer peer = accepted.get(10, TimeUnit.SECONDS);
            TcpFrameCodec.Request r = (TcpFrameCodec.Request) peer.readFrame(null);
            peer.send(ByteBuffer.wrap(header(TcpFrameCodec.READ_DATA, 0, 0, 128, r.id())), ByteBuffer.allocate(128).put(0, (byte) 9));
            Throwable t = failure(read);
            assertThat(t).isInstanceOf(ConnectionClosedException.class).hasCauseInstanceOf(ProtocolException.class);
            assertThat(sink.segment().get(ValueLayout.JAVA_BYTE, 64)).as("nothing written past the sink").isZero();
            peer.close();
        }
    }

    @Test
    void peerDyingMidReadFailsTheReadWithConnectionClosedNamingThePeer() throws Exception {
        try (ServerSocket dying = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             RdmaTransport client = RdmaTransport.open(tcp(b -> { }))) {
            CompletableFuture<RawPeer> accepted = acceptHandshaken(dying);
            RdmaConnection c = client.connect(address(dying)).get(10, TimeUnit.SECONDS);
            RegisteredRegion sink = client.register(arena.allocate(1 << 20), Access.readSink());
            CompletableFuture<Void> read = c.read(new RegionDescriptor("tcp", 0x1000, 1 << 20, 42, Access.remoteRead()),
                    0, sink.segment());
            RawPeer peer = accepted.get(10, TimeUnit.SECONDS);
            TcpFrameCodec.Request r = (TcpFrameCodec.Request) peer.readFrame(null);
            peer.send(ByteBuffer.wrap(header(TcpFrameCodec.READ_DATA, 0, 0, 4096, r.id())), ByteBuffer.allocate(1000));
            peer.close();
            Throwable t = failure(read);
            assertThat(t).isInstanceOf(ConnectionClosedException.class).hasMessageContaining(String.valueOf(liarPort(dying)));
        }
    }

    private static int liarPort(ServerSocket s) {
        return s.getLocalPort();
    }

    private static InetSocketAddress address(ServerSocket s) {
        return new InetSocketAddress(s.getInetAddress(), s.getLocalPort());
    }

    private static CompletableFuture<RawPeer> acceptHandshaken(ServerSocket server) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                RawPeer peer = new RawPeer(server.accept());
                peer.handshake(TcpFrameCodec.VERSION);
                return peer;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
    }

    private static Throwable failure(CompletableFuture<?> f) throws Exception {
        try {
            f.get(20, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("expected a failure");
    }
}
