package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The tcp responder against peers that try to exhaust or probe it: guessing keys, withholding the handshake,
 * never reading, flooding the inbox, opening many idle connections.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpHostilePeerTest {

    private static final InetSocketAddress LOOPBACK = new InetSocketAddress("127.0.0.1", 0);
    private static final String SECRET = "correct horse battery";

    private Arena arena;
    private final List<RdmaTransport> transports = new ArrayList<>();

    @BeforeEach
    void setUp() {
        arena = Arena.ofShared();
    }

    @AfterEach
    void tearDown() {
        transports.forEach(RdmaTransport::close);
        arena.close();
    }

    private RdmaTransport open(Consumer<TransportConfig.Builder> custom) {
        TransportConfig.Builder b = TransportConfig.builder().provider("tcp");
        custom.accept(b);
        RdmaTransport t = RdmaTransport.open(b.build());
        transports.add(t);
        return t;
    }

    private RegisteredRegion published(RdmaTransport on, int size) {
        MemorySegment s = arena.allocate(size, 64);
        for (int i = 0; i < size; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) i);
        }
        return on.register(s, Access.remoteRead());
    }

    /** A regular peer still reads correct data from {@code listener}. */
    private void assertServed(RdmaListener listener, RegisteredRegion region) throws Exception {
        RdmaTransport client = open(b -> { });
        int n = (int) region.descriptor().length();
        RegisteredRegion sink = client.register(arena.allocate(n), Access.readSink());
        try (RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS)) {
            c.read(region.descriptor(), 0, sink.segment()).get(10, TimeUnit.SECONDS);
        }
        for (int i = 0; i < n; i++) {
            assertThat(sink.segment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) i);
        }
    }

    private static void eventually(String what, java.util.function.BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime()).as("timed out waiting until " + what).isLessThan(deadline);
            Thread.sleep(10);
        }
    }

    // ---- refusals ----

    @Test
    void keyGuessingClosesTheConnectionAfterMaxRejectionsAndRevealsNoAddressOrSize() throws Exception {
        RdmaTransport server = open(b -> { });
        RdmaListener listener = server.listen(LOOPBACK);
        RegisteredRegion region = published(server, 4096);
        RegionDescriptor d = region.descriptor();
        long before = server.metrics().rejectedRequests();
        List<TcpFrameCodec.Error> refusals = new ArrayList<>();
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.handshake(TcpFrameCodec.VERSION);
            // one out-of-range request with the right key, then guesses
            peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 1, d.address() - 4096, 8192, d.key()));
            for (int i = 2; i <= 50; i++) {
                peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, i, d.address(), 64, d.key() + i));
            }
            try {
                while (true) {
                    refusals.add((TcpFrameCodec.Error) peer.readFrame(null));
                }
            } catch (IOException closed) {
                // the responder closed the connection
            }
        }
        assertThat(refusals).as("refusals before the responder closed the connection").hasSize(3);
        assertThat(refusals.getFirst().reason()).isEqualTo(RemoteAccessException.Reason.OUT_OF_RANGE);
        assertThat(refusals.subList(1, 3)).allSatisfy(e -> assertThat(e.reason()).isEqualTo(RemoteAccessException.Reason.UNKNOWN_KEY));
        for (TcpFrameCodec.Error e : refusals) {
            assertThat(e.message()).doesNotContain(Long.toHexString(d.address())).doesNotContain(Long.toHexString(d.address() - 4096))
                    .doesNotContain("4096").doesNotContainIgnoringCase("0x");
        }
        eventually("three rejections counted", () -> server.metrics().rejectedRequests() >= before + 3);
        assertThat(server.metrics().rejectedRequests()).isEqualTo(before + 3);
        assertServed(listener, region);
    }

    @Test
    void maxRejectionsIsConfigurable() throws Exception {
        RdmaTransport server = open(b -> b.providerOption("tcp.max-rejections", "1"));
        RdmaListener listener = server.listen(LOOPBACK);
        RegisteredRegion region = published(server, 64);
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.handshake(TcpFrameCodec.VERSION);
            peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 1, region.descriptor().address(), 64, 12345));
            peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 2, region.descriptor().address(), 64, 12346));
            assertThat(peer.readFrame(null)).isInstanceOf(TcpFrameCodec.Error.class);
            assertThat(peer.closedByPeer()).isTrue();
        }
        assertThatThrownBy(() -> open(b -> b.providerOption("tcp.max-rejections", "0")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tcp.max-rejections");
        assertThatThrownBy(() -> open(b -> b.providerOption("tcp.max-rejection", "5")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tcp.max-rejections");
    }

    // ---- handshake ----

    /** A plain echo service answers the hello with the hello itself; it is no rdma4j peer, whatever the bytes say. */
    @Test
    void aPeerThatEchoesTheHelloIsNotTakenForAnRdma4jEndpoint() throws Exception {
        RdmaTransport client = open(b -> { });
        try (java.net.ServerSocket echo = new java.net.ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            Thread.ofVirtual().start(() -> {
                try (Socket s = echo.accept()) {
                    s.getInputStream().transferTo(s.getOutputStream());
                } catch (IOException ignored) {
                    // the client closed
                }
            });
            assertThatThrownBy(() -> client.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(),
                    echo.getLocalPort())).get(10, TimeUnit.SECONDS))
                    .hasCauseInstanceOf(io.rdma4j.core.ProtocolException.class)
                    .hasMessageContaining("echoed this side's hello");
        }
    }

    @Test
    void listenerDoesNotProveTheSecretBeforeItAcceptedThePeersProof() throws Exception {
        RdmaTransport server = open(b -> b.sharedSecret(SECRET));
        RdmaListener listener = server.listen(LOOPBACK);
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.out.write(TcpFrameCodec.encodeHello(TcpFrameCodec.FLAG_AUTH, new byte[TcpFrameCodec.NONCE_SIZE]).array());
            assertThat(peer.readHello().wantsAuth()).isTrue();
            Thread.sleep(200);
            assertThat(peer.in.available()).as("nothing but the hello before the peer proved itself").isZero();
            peer.out.write(new byte[TcpFrameCodec.PROOF_SIZE]); // a guess
            assertThat(peer.in.read()).as("verdict: rejected").isZero();
            assertThat(peer.in.read()).as("then the connection ends, without the listener's proof").isEqualTo(-1);
        }
    }

    @Test
    void peerWithoutTheSecretIsRefusedByAListenerWithOne() throws Exception {
        RdmaTransport server = open(b -> b.sharedSecret(SECRET));
        RdmaListener listener = server.listen(LOOPBACK);
        long before = server.metrics().rejectedRequests();
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.handshake(TcpFrameCodec.VERSION); // no FLAG_AUTH
            peer.send(TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 1, 0x1000, 8, 42));
            assertThat(peer.closedByPeer()).isTrue();
        }
        eventually("the refused peer is counted", () -> server.metrics().rejectedRequests() > before);
        assertThat(server.metrics().openConnections()).isZero();
    }

    @Test
    void secretsShorterThan128BitsOrEmptyAreRefusedAtOpen() {
        assertThatThrownBy(() -> open(b -> b.sharedSecret("fifteen bytes!!")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least 16 bytes");
        assertThatThrownBy(() -> open(b -> b.sharedSecret("")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least 16 bytes");
        assertThatThrownBy(() -> transports.add(RdmaTransport.open(TransportConfig.fromProperties(
                Map.of("x.provider", "tcp", "x.shared-secret", ""), "x."))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("shared-secret");
        assertThat(open(b -> b.sharedSecret("sixteen bytes!!!")).provider()).isEqualTo("tcp");
    }

    @Test
    void handshakeTimeoutClosesAnAcceptedPeerThatSaysNothing() throws Exception {
        RdmaTransport server = open(b -> b.providerOption("tcp.handshake-timeout", "300ms"));
        RdmaListener listener = server.listen(LOOPBACK);
        try (Socket mute = new Socket(InetAddress.getLoopbackAddress(), listener.localAddress().getPort())) {
            mute.setSoTimeout(10_000);
            long start = System.nanoTime();
            byte[] hello = mute.getInputStream().readNBytes(TcpFrameCodec.HELLO_SIZE);
            assertThat(hello).hasSize(TcpFrameCodec.HELLO_SIZE);
            assertThat(mute.getInputStream().read()).isEqualTo(-1);
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isBetween(250L, 5000L);
        }
    }

    // ---- idle connections ----

    /**
     * 2,000 sockets from eight other loopback addresses (127.0.0.2-9), held open without a word or silent
     * after the handshake. The per-address limit closes most at accept; the handshake and idle timeouts close the
     * rest; a legitimate peer from 127.0.0.1 is served all the while.
     */
    @Test
    void twoThousandIdleConnectionsAreRefusedOrTimedOutAndARegularPeerIsServed() throws Exception {
        int sockets = 2000;
        int perAddress = 32;
        RdmaTransport server = open(b -> b.providerOption("tcp.max-connections-per-address", Integer.toString(perAddress))
                .providerOption("tcp.max-connections", "512")
                .providerOption("tcp.handshake-timeout", "1s")
                .providerOption("tcp.idle-timeout", "1s"));
        RdmaListener listener = server.listen(LOOPBACK);
        RegisteredRegion region = published(server, 4096);
        long before = server.metrics().rejectedRequests();
        List<Socket> idle = new ArrayList<>(sockets);
        long start = System.nanoTime();
        try {
            for (int i = 0; i < sockets; i++) {
                Socket s = new Socket();
                s.bind(new InetSocketAddress(InetAddress.getByAddress(new byte[] {127, 0, 0, (byte) (2 + i % 8)}), 0));
                s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), listener.localAddress().getPort()), 5000);
                s.setSoTimeout(10_000);
                idle.add(s);
                if (i % 2 == 0) {
                    // half of them complete the handshake, then go silent
                    s.getOutputStream().write(TcpFrameCodec.encodeHello(0, new byte[TcpFrameCodec.NONCE_SIZE]).array());
                }
            }
            long opened = System.nanoTime();
            assertServed(listener, region);
            long served = System.nanoTime();
            eventually("every idle socket is closed by the responder", () -> idle.stream().allMatch(TcpHostilePeerTest::closedByResponder));
            long allClosed = System.nanoTime();
            long refusedAtAccept = server.metrics().rejectedRequests() - before;
            System.out.printf("idle flood: %d sockets opened in %d ms, regular peer served %d ms later, all closed %d ms"
                            + " after opening; %d rejections counted (accept limits and timeouts)%n", sockets,
                    TimeUnit.NANOSECONDS.toMillis(opened - start), TimeUnit.NANOSECONDS.toMillis(served - opened),
                    TimeUnit.NANOSECONDS.toMillis(allClosed - opened), refusedAtAccept);
            assertThat(refusedAtAccept).as("8 addresses x %d admitted, the rest refused at accept", perAddress)
                    .isGreaterThanOrEqualTo(sockets - 8L * perAddress);
            eventually("no connection left open", () -> server.metrics().openConnections() == 0);
        } finally {
            for (Socket s : idle) {
                s.close();
            }
        }
    }

    @Test
    void socketsBeyondTheHandshakeBudgetDisplaceTheOldestWhichAreCountedAndClosed() throws Exception {
        RdmaTransport server = open(b -> b.providerOption("tcp.max-handshakes", "4"));
        RdmaListener listener = server.listen(LOOPBACK);
        RegisteredRegion region = published(server, 4096);
        List<Socket> silent = new ArrayList<>();
        try {
            for (int i = 0; i < 6; i++) {
                Socket s = new Socket(InetAddress.getLoopbackAddress(), listener.localAddress().getPort());
                s.getInputStream().readNBytes(TcpFrameCodec.HELLO_SIZE); // accepted: the responder said hello
                silent.add(s);
            }
            eventually("two sockets displaced", () -> server.metrics().displacedHandshakes() == 2);
            assertThat(closedByResponder(silent.get(0))).as("the oldest was closed").isTrue();
            assertThat(closedByResponder(silent.get(1))).isTrue();
            assertThat(closedByResponder(silent.get(5))).as("the newest is still waiting for its hello").isFalse();
            assertServed(listener, region);
            assertThat(server.metrics().displacedHandshakes()).as("the regular peer displaced the oldest left").isEqualTo(3);
        } finally {
            for (Socket s : silent) {
                s.close();
            }
        }
    }

    /** Whether the responder closed {@code s}: it reads to the end of what the responder sent, if any. */
    static boolean closedByResponder(Socket s) {
        try {
            s.setSoTimeout(1);
            byte[] buffer = new byte[256];
            while (true) {
                if (s.getInputStream().read(buffer) < 0) {
                    return true;
                }
            }
        } catch (java.net.SocketTimeoutException e) {
            return false;
        } catch (IOException e) {
            return true;
        }
    }

    // ---- floods of a peer that does not read ----

    /** Writes {@code frame} over and over from a virtual thread, counting the bytes the socket took. */
    private static Thread flood(OutputStream out, ByteBuffer frame, AtomicLong written) {
        byte[] bytes = new byte[frame.remaining()];
        frame.get(bytes);
        byte[] batch = new byte[bytes.length * Math.max(1, 8192 / bytes.length)];
        for (int i = 0; i + bytes.length <= batch.length; i += bytes.length) {
            System.arraycopy(bytes, 0, batch, i, bytes.length);
        }
        return Thread.ofVirtual().start(() -> {
            try {
                while (true) {
                    out.write(batch);
                    written.addAndGet(batch.length);
                }
            } catch (IOException closed) {
                // the test closed the socket
            }
        });
    }

    /** Waits until {@code written} stops growing for half a second; returns its value then. */
    private static long stalled(AtomicLong written, long maxMillis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(maxMillis);
        long last = -1;
        while (System.nanoTime() < deadline) {
            long now = written.get();
            if (now == last) {
                return now;
            }
            last = now;
            Thread.sleep(500);
        }
        return written.get();
    }

    @Test
    @SuppressWarnings("try") // the peer closes inside its try on purpose: the flooder must fail before the join
    void readRequestsWhoseResponsesAreNeverReadStopTheRespondersReadingAndASecondPeerIsServed() throws Exception {
        RdmaTransport server = open(b -> b.providerOption("tcp.max-unsent-responses", "256"));
        RdmaListener listener = server.listen(LOOPBACK);
        RegisteredRegion region = published(server, 4096);
        RegionDescriptor d = region.descriptor();
        AtomicLong written = new AtomicLong();
        try (Socket peer = new Socket(InetAddress.getLoopbackAddress(), listener.localAddress().getPort())) {
            peer.setReceiveBufferSize(4096);
            peer.getOutputStream().write(TcpFrameCodec.encodeHello(0, new byte[TcpFrameCodec.NONCE_SIZE]).array());
            peer.getInputStream().readNBytes(TcpFrameCodec.HELLO_SIZE);
            Thread flooder = flood(peer.getOutputStream(), TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 1, d.address(), 4096, d.key()), written);
            long requests = stalled(written, 20_000) / (TcpFrameCodec.HEADER_SIZE + TcpFrameCodec.REQUEST_BODY_SIZE);
            System.out.printf("read flood: the responder stopped reading after the socket took %d requests%n", requests);
            // 256 queued plus what the kernel's socket buffers hold (a few MiB on loopback); unbounded it is millions
            assertThat(requests).as("requests the socket took before the responder stopped reading").isLessThan(300_000);
            assertServed(listener, region);
            peer.close();
            flooder.join(5000);
        }
        eventually("the flooding connection is gone", () -> server.metrics().openConnections() == 0);
    }

    @Test
    @SuppressWarnings("try") // the peer closes inside its try on purpose: the flooder must fail before the join
    void inboxFloodStopsReadingUntilTheApplicationReceives() throws Exception {
        RdmaTransport server = open(b -> b.providerOption("tcp.max-inbox-bytes", "256k"));
        BlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
        RdmaListener listener = server.listen(LOOPBACK, accepted::add);
        RegisteredRegion region = published(server, 4096);
        int body = 60_000;
        ByteBuffer message = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE + 16 + body);
        TcpFrameCodec.putHeader(message, TcpFrameCodec.SEND, 16 + body, 0);
        message.put((byte) 1).put((byte) 1).putShort((short) 0).putInt(0).putLong(0); // MESSAGE kind, version 1
        message.position(message.capacity()).flip();
        AtomicLong written = new AtomicLong();
        try (Socket peer = new Socket(InetAddress.getLoopbackAddress(), listener.localAddress().getPort())) {
            peer.getOutputStream().write(TcpFrameCodec.encodeHello(0, new byte[TcpFrameCodec.NONCE_SIZE]).array());
            peer.getInputStream().readNBytes(TcpFrameCodec.HELLO_SIZE);
            RdmaConnection serving = accepted.poll(10, TimeUnit.SECONDS);
            Thread flooder = flood(peer.getOutputStream(), message, written);
            long stalledAt = stalled(written, 20_000);
            long messages = stalledAt / message.capacity();
            System.out.printf("inbox flood: the responder stopped reading after the socket took %d messages of %d bytes%n",
                    messages, body);
            // 256 KiB in the inbox plus the socket buffers; unbounded, 4096 messages (240 MiB) before a close
            assertThat(stalledAt).isLessThan(64L << 20);
            assertThat(serving.isOpen()).as("a full inbox holds the peer back instead of closing").isTrue();
            assertThat(server.metrics().bufferedBytes()).as("bytes held for the peer").isGreaterThanOrEqualTo(256L << 10);
            assertServed(listener, region);
            for (int i = 0; i < 64; i++) {
                assertThat(serving.receive().get(10, TimeUnit.SECONDS).remaining()).isEqualTo(body);
            }
            eventually("reading resumes once the application received", () -> written.get() > stalledAt);
            serving.close();
            eventually("a closed connection's messages no longer count", () -> server.metrics().bufferedBytes() == 0);
            peer.close();
            flooder.join(5000);
        }
    }

    @Test
    void aPeerThatHandshakesAndGoesSilentIsClosedByTheIdleTimeoutWhileALiveOneIsKept() throws Exception {
        RdmaTransport server = open(b -> b.providerOption("tcp.idle-timeout", "400ms"));
        RdmaTransport client = open(b -> b.providerOption("tcp.idle-timeout", "400ms"));
        RdmaListener listener = server.listen(LOOPBACK);
        RegisteredRegion region = published(server, 64);
        RegisteredRegion sink = client.register(arena.allocate(64), Access.readSink());
        RdmaConnection live = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
        try (RawPeer silent = RawPeer.connect(listener.localAddress())) {
            silent.handshake(TcpFrameCodec.VERSION);
            long start = System.nanoTime();
            assertThat(silent.closedByPeer()).isTrue();
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)).isBetween(300L, 5000L);
        }
        // idle but alive: keep-alives carry it through several timeouts
        Thread.sleep(1500);
        assertThat(live.isOpen()).isTrue();
        live.read(region.descriptor(), 0, sink.segment()).get(10, TimeUnit.SECONDS);
    }

    @Test
    void closeRacingInFlightServesEndsEveryOperationAndLeavesTheResponderServing() throws Exception {
        RdmaTransport server = open(b -> { });
        BlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
        RdmaListener listener = server.listen(LOOPBACK, accepted::add);
        RegisteredRegion big = server.register(arena.allocate(8 << 20), Access.remoteReadWrite());
        RdmaTransport client = open(b -> { });
        RegisteredRegion sink = client.register(arena.allocate(8 << 20), Access.readSink());
        for (int round = 0; round < 20; round++) {
            RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
            RdmaConnection responderSide = accepted.poll(10, TimeUnit.SECONDS);
            List<CompletableFuture<Void>> ops = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                ops.add(c.read(big.descriptor(), i << 20, sink.segment().asSlice((long) i << 20, 1 << 20)));
                ops.add(c.write(big.descriptor(), i << 20, sink.segment().asSlice((long) i << 20, 1 << 20)));
            }
            Thread.sleep(round % 3);
            (round % 2 == 0 ? responderSide : c).close();
            for (CompletableFuture<Void> op : ops) {
                try {
                    op.get(10, TimeUnit.SECONDS);
                } catch (java.util.concurrent.ExecutionException e) {
                    assertThat(e.getCause()).isInstanceOf(io.rdma4j.core.ConnectionClosedException.class);
                }
            }
            c.close();
        }
        eventually("every connection gone", () -> server.metrics().openConnections() == 0);
        big.close();
        assertThat(server.registeredRegions()).isZero();
        assertServed(listener, published(server, 4096));
    }
}
