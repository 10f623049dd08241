package io.rdma4j.core.tcp;

import io.rdma4j.core.RdmaException;
import java.net.ServerSocket;
import java.io.ByteArrayOutputStream;
import javax.net.ssl.TrustManager;
import java.security.cert.Certificate;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import io.rdma4j.core.Access;
import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * TLS on the tcp provider: mutual certificate authentication, a wrong certificate, a plaintext peer, and a
 * relay that is a trusted TLS endpoint on both sides but does not know the shared secret.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpTlsTest {

    private static final InetSocketAddress LOOPBACK = new InetSocketAddress("127.0.0.1", 0);
    private static final String SECRET = "correct horse battery";
    private static final String PASSWORD = TlsStores.PASSWORD;

    private static Path member;
    private static Path stranger;
    private static Path trust;

    private Arena arena;
    private final List<AutoCloseable> closing = new ArrayList<>();

    @BeforeAll
    static void makeStores() {
        TlsStores stores = TlsStores.get();
        member = stores.member;
        stranger = stores.stranger;
        trust = stores.trust;
    }

    @BeforeEach
    void setUp() {
        arena = Arena.ofShared();
    }

    @AfterEach
    void tearDown() throws Exception {
        for (AutoCloseable c : closing.reversed()) {
            c.close();
        }
        arena.close();
    }

    private RdmaTransport open(Consumer<TransportConfig.Builder> custom) {
        TransportConfig.Builder b = TransportConfig.builder().provider("tcp");
        custom.accept(b);
        RdmaTransport t = RdmaTransport.open(b.build());
        closing.add(t);
        return t;
    }

    private static Consumer<TransportConfig.Builder> tls(Path keyStore) {
        return b -> {
            b.providerOption("tcp.tls", "true").providerOption("tcp.tls.trust-store", trust.toString())
                    .providerOption("tcp.tls.trust-store-password", PASSWORD);
            if (keyStore != null) {
                b.providerOption("tcp.tls.key-store", keyStore.toString()).providerOption("tcp.tls.key-store-password", PASSWORD);
            }
        };
    }

    private RegisteredRegion published(RdmaTransport on, int size) {
        MemorySegment s = arena.allocate(size, 64);
        for (int i = 0; i < size; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7));
        }
        return on.register(s, Access.remoteRead());
    }

    private void assertReads(RdmaTransport client, InetSocketAddress address, RegisteredRegion region) throws Exception {
        int n = (int) region.descriptor().length();
        RegisteredRegion sink = client.register(arena.allocate(n), Access.readSink());
        try (RdmaConnection c = client.connect(address).get(10, TimeUnit.SECONDS)) {
            c.read(region.descriptor(), 0, sink.segment()).get(10, TimeUnit.SECONDS);
            c.send(ByteBuffer.wrap(new byte[] {1, 2, 3})).get(10, TimeUnit.SECONDS);
        }
        for (int i = 0; i < n; i++) {
            assertThat(sink.segment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) (i * 7));
        }
    }

    private static Throwable failure(java.util.concurrent.CompletableFuture<?> f) throws Exception {
        try {
            f.get(15, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("expected a failure");
    }

    @Test
    void mutualTlsWithTheSharedSecretServesReadsAndMessages() throws Exception {
        RdmaTransport server = open(tls(member).andThen(b -> b.sharedSecret(SECRET)));
        RdmaTransport client = open(tls(member).andThen(b -> b.sharedSecret(SECRET)));
        RdmaListener listener = server.listen(LOOPBACK);
        assertReads(client, listener.localAddress(), published(server, 3 << 20));
    }

    @Test
    void aCertificateTheOtherSideDoesNotTrustIsRefusedInBothDirections() throws Exception {
        RdmaTransport server = open(tls(stranger));
        RdmaListener untrustedListener = server.listen(LOOPBACK);
        RdmaTransport client = open(tls(member));
        assertThat(failure(client.connect(untrustedListener.localAddress()))).isInstanceOf(AuthenticationException.class)
                .hasMessageContaining("TLS");

        RdmaTransport guarded = open(tls(member));
        RdmaListener listener = guarded.listen(LOOPBACK);
        RdmaTransport untrustedClient = open(tls(stranger));
        assertThat(failure(untrustedClient.connect(listener.localAddress()))).isInstanceOf(RdmaException.class);
        RdmaTransport anonymous = open(tls(null));
        assertThat(failure(anonymous.connect(listener.localAddress()))).isInstanceOf(RdmaException.class);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (guarded.metrics().rejectedRequests() < 2 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(guarded.metrics().rejectedRequests()).as("both refused by the listener").isGreaterThanOrEqualTo(2);
        assertReads(client, listener.localAddress(), published(guarded, 4096));
    }

    @Test
    void aPlaintextPeerIsRefusedByATlsListener() throws Exception {
        RdmaTransport server = open(tls(member));
        RdmaListener listener = server.listen(LOOPBACK);
        RdmaTransport plain = open(b -> { });
        assertThat(failure(plain.connect(listener.localAddress()))).isInstanceOf(RdmaException.class);
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.sendHello(TcpFrameCodec.VERSION);
            assertThat(peer.closedByPeer()).isTrue();
        }
        assertThat(server.metrics().openConnections()).isZero();
        assertThat(server.metrics().rejectedRequests()).isGreaterThanOrEqualTo(1);
    }

    /**
     * The relay is a trusted TLS endpoint towards both sides (it holds the member certificate) and forwards the
     * bytes of the shared-secret handshake. The proofs are bound to each TLS session's exported keying material,
     * so the connecting side's proof does not verify in the relay's session with the listener.
     */
    @Test
    void aRelayedHandshakeFailsBecauseTheSecretIsBoundToTheTlsSession() throws Exception {
        RdmaTransport server = open(tls(member).andThen(b -> b.sharedSecret(SECRET)));
        RdmaListener listener = server.listen(LOOPBACK);
        RdmaTransport client = open(tls(member).andThen(b -> b.sharedSecret(SECRET)));
        Forwarder relay = Forwarder.relay(listener.localAddress());
        closing.add(relay);
        Throwable relayed = failure(client.connect(relay.address()));
        assertThat(relayed).isInstanceOf(AuthenticationException.class).hasMessageContaining("shared secret");
        assertThat(relay.seen()).as("the relay carried the handshake").isNotEmpty();
        assertThat(server.metrics().openConnections()).isZero();
        assertReads(client, listener.localAddress(), published(server, 4096));
    }

    private static final int WHO_AM_I = RequestTypes.FIRST_APPLICATION_TYPE;

    /** A listener whose handler answers each request with the principal it was given, or "-" for none. */
    private RdmaListener principalEcho(RdmaTransport server) {
        return server.listen(LOOPBACK, RequestHandlers.of(WHO_AM_I, RequestHandler.answering(
                (body, context) -> ByteBuffer.wrap(context.peer().principal().orElse("-")
                        .getBytes(StandardCharsets.UTF_8)))));
    }

    private static String principalSeenBy(RdmaTransport client, RdmaListener listener) throws Exception {
        try (RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS)) {
            ByteBuffer reply = c.requestAndWait(WHO_AM_I, ByteBuffer.allocate(0));
            return StandardCharsets.UTF_8.decode(reply).toString();
        }
    }

    @Test
    void theHandlerSeesTheSubjectOfTheConnectingSidesVerifiedCertificate() throws Exception {
        RdmaListener mutual = principalEcho(open(tls(member).andThen(b -> b.sharedSecret(SECRET))));
        assertThat(principalSeenBy(open(tls(member).andThen(b -> b.sharedSecret(SECRET))), mutual)).isEqualTo("CN=member");

        RdmaListener serverOnly = principalEcho(open(tls(member).andThen(b -> b.providerOption("tcp.tls.client-auth", "none"))));
        assertThat(principalSeenBy(open(tls(null)), serverOnly)).as("no client certificate, no principal").isEqualTo("-");

        RdmaListener secretOnly = principalEcho(open(b -> b.sharedSecret(SECRET)));
        assertThat(principalSeenBy(open(b -> b.sharedSecret(SECRET)), secretOnly)).as("a secret names no one").isEqualTo("-");
    }

    private static Consumer<TransportConfig.Builder> secretTls(String secret) {
        return b -> b.providerOption("tcp.tls", "true").providerOption("tcp.tls.authentication", "shared-secret")
                .sharedSecret(secret);
    }

    @Test
    void sharedSecretModeEncryptsWithoutCertificatesAndRefusesWhoLacksTheSecret() throws Exception {
        RdmaTransport server = open(secretTls(SECRET));
        RdmaListener listener = principalEcho(server);
        RegisteredRegion region = published(server, 1 << 20);
        assertReads(open(secretTls(SECRET)), listener.localAddress(), region);
        assertThat(principalSeenBy(open(secretTls(SECRET)), listener)).as("ephemeral certificates name no one").isEqualTo("-");

        assertThat(failure(open(secretTls(SECRET + " but wrong")).connect(listener.localAddress())))
                .isInstanceOf(AuthenticationException.class).hasMessageContaining("shared secret");
        assertThat(failure(open(b -> b.sharedSecret(SECRET)).connect(listener.localAddress())))
                .as("plaintext with the right secret").isInstanceOf(RdmaException.class);
        assertThat(failure(open(tls(member).andThen(b -> b.sharedSecret(SECRET))).connect(listener.localAddress())))
                .as("certificate mode without the listener's trust").isInstanceOf(AuthenticationException.class);
        assertThat(server.metrics().openConnections()).isZero();
        assertReads(open(secretTls(SECRET)), listener.localAddress(), region);
    }

    /** Anyone can terminate TLS in shared-secret mode; the secret bound to each session still stops the relay. */
    @Test
    void aRelayThatTerminatesTlsOnBothSidesFailsInSharedSecretMode() throws Exception {
        RdmaTransport server = open(secretTls(SECRET));
        RdmaListener listener = server.listen(LOOPBACK);
        EphemeralCertificate relayIdentity = EphemeralCertificate.create();
        KeyStore keys = KeyStore.getInstance("PKCS12");
        keys.load(null, null);
        keys.setKeyEntry("relay", relayIdentity.keys().getPrivate(), new char[0],
                new Certificate[] {relayIdentity.certificate()});
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(keys, new char[0]);
        SSLContext context = SSLContext.getInstance("TLSv1.3");
        context.init(kmf.getKeyManagers(), new TrustManager[] {new TcpTls.UncheckedCertificates()}, null);
        Forwarder relay = Forwarder.relay(listener.localAddress(), context, false);
        closing.add(relay);
        assertThat(failure(open(secretTls(SECRET)).connect(relay.address())))
                .isInstanceOf(AuthenticationException.class).hasMessageContaining("shared secret");
        assertThat(relay.seen()).as("the relay carried the handshake").isNotEmpty();
        assertThat(server.metrics().openConnections()).isZero();
    }

    /** What a passive observer of the wire sees: with TLS, none of the region's bytes. */
    @Test
    void aPassiveObserverSeesCiphertextOnly() throws Exception {
        for (boolean encrypted : new boolean[] {false, true}) {
            RdmaTransport server = open(encrypted ? secretTls(SECRET) : b -> b.sharedSecret(SECRET));
            RdmaListener listener = server.listen(LOOPBACK);
            byte[] marker = "rdma4j-plaintext-marker-0123456789".getBytes(StandardCharsets.US_ASCII);
            MemorySegment data = arena.allocate(64 << 10);
            for (long at = 0; at + marker.length <= data.byteSize(); at += marker.length) {
                MemorySegment.copy(marker, 0, data, ValueLayout.JAVA_BYTE, at, marker.length);
            }
            RegisteredRegion region = server.register(data, Access.remoteRead());
            Forwarder tap = Forwarder.tap(listener.localAddress());
            closing.add(tap);
            RdmaTransport client = open(encrypted ? secretTls(SECRET) : b -> b.sharedSecret(SECRET));
            RegisteredRegion sink = client.register(arena.allocate(data.byteSize()), Access.readSink());
            try (RdmaConnection c = client.connect(tap.address()).get(10, TimeUnit.SECONDS)) {
                c.read(region.descriptor(), 0, sink.segment()).get(10, TimeUnit.SECONDS);
            }
            assertThat(sink.segment().mismatch(data)).isEqualTo(-1L);
            String wire = new String(tap.seen(), StandardCharsets.ISO_8859_1);
            assertThat(wire.length()).isGreaterThan((int) data.byteSize());
            assertThat(wire.contains("rdma4j-plaintext-marker")).as("encrypted=" + encrypted).isEqualTo(!encrypted);
        }
    }

    @Test
    void tlsSettingsAreChecked() {
        assertThatThrownBy(() -> open(b -> b.providerOption("tcp.tls.key-store", member.toString())))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tcp.tls=true");
        assertThatThrownBy(() -> open(b -> b.providerOption("tcp.tls", "yes")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("true or false");
        assertThatThrownBy(() -> open(tls(member).andThen(b -> b.providerOption("tcp.tls.client-auth", "optional"))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("required or none");
        assertThatThrownBy(() -> open(tls(member.resolveSibling("missing.p12"))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tcp.tls.key-store");
        assertThatThrownBy(() -> open(b -> b.providerOption("tcp.tls", "true").providerOption("tcp.tls.authentication", "shared-secret")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("needs shared-secret");
        assertThatThrownBy(() -> open(tls(member).andThen(secretTls(SECRET))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not apply");
        assertThatThrownBy(() -> open(secretTls(SECRET).andThen(b -> b.providerOption("tcp.tls.authentication", "none"))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("certificates or shared-secret");
        RdmaTransport keyless = open(tls(null));
        assertThatThrownBy(() -> keyless.listen(LOOPBACK))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tcp.tls.key-store");
    }

    /**
     * Accepts connections and forwards each to {@code target}, copying the bytes both ways and keeping them: a relay
     * that terminates TLS on both sides (given TLS sockets), or a tap on the raw wire (given plain ones).
     */
    private static final class Forwarder implements AutoCloseable {
        private final ServerSocket server;
        private final Callable<Socket> connectToTarget;
        private final ByteArrayOutputStream seen = new ByteArrayOutputStream();
        private final List<Socket> sockets = new ArrayList<>();

        private Forwarder(ServerSocket server, Callable<Socket> connectToTarget) {
            this.server = server;
            this.connectToTarget = connectToTarget;
            Thread.ofVirtual().start(this::acceptLoop);
        }

        /** Terminates TLS from the connecting side and opens its own TLS session to {@code target}. */
        static Forwarder relay(InetSocketAddress target, SSLContext context, boolean needClientAuth) throws IOException {
            SSLServerSocket server = (SSLServerSocket) context.getServerSocketFactory()
                    .createServerSocket(0, 10, InetAddress.getLoopbackAddress());
            server.setNeedClientAuth(needClientAuth);
            return new Forwarder(server, () -> context.getSocketFactory().createSocket(target.getAddress(), target.getPort()));
        }

        /** A relay holding the member certificate: trusted by both sides. */
        static Forwarder relay(InetSocketAddress target) throws Exception {
            return relay(target, memberContext(), true);
        }

        /** Forwards the raw bytes. */
        static Forwarder tap(InetSocketAddress target) throws IOException {
            return new Forwarder(new ServerSocket(0, 10, InetAddress.getLoopbackAddress()),
                    () -> new Socket(target.getAddress(), target.getPort()));
        }

        private static SSLContext memberContext() throws Exception {
            KeyStore keys = KeyStore.getInstance("PKCS12");
            try (InputStream in = Files.newInputStream(member)) {
                keys.load(in, PASSWORD.toCharArray());
            }
            KeyStore trusted = KeyStore.getInstance("PKCS12");
            try (InputStream in = Files.newInputStream(trust)) {
                trusted.load(in, PASSWORD.toCharArray());
            }
            KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(keys, PASSWORD.toCharArray());
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trusted);
            SSLContext context = SSLContext.getInstance("TLSv1.3");
            context.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
            return context;
        }

        InetSocketAddress address() {
            return new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort());
        }

        /** Every byte forwarded so far, both directions interleaved. */
        byte[] seen() {
            synchronized (seen) {
                return seen.toByteArray();
            }
        }

        private void acceptLoop() {
            try {
                while (true) {
                    Socket from = server.accept();
                    Socket to = connectToTarget.call();
                    synchronized (sockets) {
                        sockets.add(from);
                        sockets.add(to);
                    }
                    Thread.ofVirtual().start(() -> copy(from, to));
                    Thread.ofVirtual().start(() -> copy(to, from));
                }
            } catch (Exception closed) {
                // the test closed the forwarder
            }
        }

        private void copy(Socket from, Socket to) {
            byte[] buffer = new byte[8192];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buffer)) > 0) {
                    synchronized (seen) {
                        seen.write(buffer, 0, n);
                    }
                    out.write(buffer, 0, n);
                    out.flush();
                }
            } catch (IOException ended) {
                // either side went away
            }
        }

        @Override
        public void close() throws IOException {
            server.close();
            synchronized (sockets) {
                for (Socket s : sockets) {
                    s.close();
                }
            }
        }
    }
}
