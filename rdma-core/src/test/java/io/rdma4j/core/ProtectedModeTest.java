package io.rdma4j.core;

import io.rdma4j.core.tcp.TlsStores;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Protected mode: a listener other hosts can reach opens only when peers must authenticate (shared secret or mutual
 * TLS) or the user allowed unauthenticated peers, which is logged once per transport.
 */
class ProtectedModeTest {

    private static final String SECRET = "a protected-mode test secret";
    /** Every interface: the widest exposure, and an address every machine has. */
    private static final InetSocketAddress WILDCARD = new InetSocketAddress(0);

    private final List<AutoCloseable> closing = new ArrayList<>();
    private final List<LogRecord> warnings = new ArrayList<>();
    private final Logger rdma4jLog = Logger.getLogger("io.rdma4j");
    private final Handler warningCollector = new Handler() {
        @Override
        public synchronized void publish(LogRecord record) {
            if (record.getLevel() == Level.WARNING) {
                synchronized (warnings) {
                    warnings.add(record);
                }
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    @BeforeEach
    void captureWarnings() {
        rdma4jLog.addHandler(warningCollector);
    }

    @AfterEach
    void tearDown() throws Exception {
        rdma4jLog.removeHandler(warningCollector);
        for (AutoCloseable c : closing.reversed()) {
            c.close();
        }
    }

    private RdmaTransport open(Consumer<TransportConfig.Builder> custom) {
        TransportConfig.Builder b = TransportConfig.builder().provider("tcp");
        custom.accept(b);
        RdmaTransport t = RdmaTransport.open(b.build());
        closing.add(t);
        return t;
    }

    private List<String> unauthenticatedWarnings() {
        synchronized (warnings) {
            return warnings.stream().map(LogRecord::getMessage).filter(m -> m.contains("unauthenticated")).toList();
        }
    }

    @Test
    void listenerOffLoopbackWithoutAuthenticationRefusesToOpenAndSaysWhatToDo() throws Exception {
        RdmaTransport server = open(b -> { });
        List<InetSocketAddress> exposed = new ArrayList<>(List.of(WILDCARD));
        nonLoopbackAddress().ifPresent(ip -> exposed.add(new InetSocketAddress(ip, 0)));
        for (InetSocketAddress address : exposed) {
            assertThatThrownBy(() -> server.listen(address, c -> { }))
                    .as("listening on %s", address)
                    .isInstanceOf(ProtectedModeException.class)
                    .hasMessageContaining("shared-secret")
                    .hasMessageContaining("tcp.tls=true")
                    .hasMessageContaining("allow-unauthenticated=true");
        }
        // Nothing was left listening: the transport still closes cleanly and serves loopback.
        RdmaListener loopback = server.listen(new InetSocketAddress("127.0.0.1", 0), c -> { });
        assertThat(loopback.localAddress().getAddress().isLoopbackAddress()).isTrue();
    }

    @Test
    void loopbackListenersNeedNoAuthenticationAndWarnNothing() throws Exception {
        RdmaTransport server = open(b -> { });
        RdmaTransport client = open(b -> { });
        for (String host : List.of("127.0.0.1", "127.0.0.2")) {
            RdmaListener listener = server.listen(new InetSocketAddress(host, 0), c -> c.send(new byte[] {7}));
            try (RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS)) {
                assertThat(c.receive().get(10, TimeUnit.SECONDS)).isEqualTo(java.nio.ByteBuffer.wrap(new byte[] {7}));
            }
        }
        assertThat(unauthenticatedWarnings()).isEmpty();
    }

    @Test
    void sharedSecretOpensEveryInterfaceAndServesOnlyPeersThatProveIt() throws Exception {
        RdmaTransport server = open(b -> b.sharedSecret(SECRET));
        RdmaListener listener = server.listen(WILDCARD, c -> c.send(new byte[] {1}));
        InetSocketAddress target = new InetSocketAddress("127.0.0.1", listener.localAddress().getPort());

        RdmaTransport member = open(b -> b.sharedSecret(SECRET));
        try (RdmaConnection c = member.connect(target).get(10, TimeUnit.SECONDS)) {
            assertThat(c.receive().get(10, TimeUnit.SECONDS)).isEqualTo(java.nio.ByteBuffer.wrap(new byte[] {1}));
        }
        RdmaTransport stranger = open(b -> { });
        assertThatThrownBy(() -> stranger.connect(target).get(10, TimeUnit.SECONDS))
                .isInstanceOf(ExecutionException.class).hasCauseInstanceOf(AuthenticationException.class);
        assertThat(unauthenticatedWarnings()).isEmpty();
    }

    @Test
    void mutualTlsCountsAsAuthenticationButServerOnlyTlsDoesNot() {
        TlsStores stores = TlsStores.get();
        Consumer<TransportConfig.Builder> tls = b -> b.providerOption("tcp.tls", "true")
                .providerOption("tcp.tls.key-store", stores.member.toString())
                .providerOption("tcp.tls.key-store-password", TlsStores.PASSWORD)
                .providerOption("tcp.tls.trust-store", stores.trust.toString())
                .providerOption("tcp.tls.trust-store-password", TlsStores.PASSWORD);
        RdmaListener mutual = open(tls).listen(WILDCARD, c -> { });
        assertThat(mutual.localAddress().getPort()).isPositive();

        RdmaTransport serverOnly = open(tls.andThen(b -> b.providerOption("tcp.tls.client-auth", "none")));
        assertThatThrownBy(() -> serverOnly.listen(WILDCARD, c -> { }))
                .as("TLS that does not check the connecting side's certificate authenticates nobody")
                .isInstanceOf(ProtectedModeException.class);
        assertThat(unauthenticatedWarnings()).isEmpty();
    }

    @Test
    void allowUnauthenticatedServesAnyPeerWithOneWarningPerTransport() throws Exception {
        RdmaTransport server = open(b -> b.allowUnauthenticated(true));
        RdmaListener first = server.listen(WILDCARD, c -> c.send(new byte[] {2}));
        server.listen(WILDCARD, c -> { });
        List<String> lines = unauthenticatedWarnings();
        assertThat(lines).as("one WARN line for the transport's two listeners").hasSize(1);
        assertThat(lines.getFirst()).contains("allow-unauthenticated=true").contains("shared-secret");

        RdmaTransport anyone = open(b -> { });
        try (RdmaConnection c = anyone.connect(new InetSocketAddress("127.0.0.1", first.localAddress().getPort()))
                .get(10, TimeUnit.SECONDS)) {
            assertThat(c.receive().get(10, TimeUnit.SECONDS)).isEqualTo(java.nio.ByteBuffer.wrap(new byte[] {2}));
        }
        open(b -> b.allowUnauthenticated(true)).listen(WILDCARD, c -> { });
        assertThat(unauthenticatedWarnings()).as("a second transport warns for itself").hasSize(2);
    }

    @Test
    void allowUnauthenticatedIsReadFromPropertiesAndMustBeABoolean() {
        assertThat(TransportConfig.defaults().allowUnauthenticated()).isFalse();
        assertThat(TransportConfig.fromProperties(Map.of("x.allow-unauthenticated", "TRUE"), "x.").allowUnauthenticated())
                .isTrue();
        assertThatThrownBy(() -> TransportConfig.fromProperties(Map.of("x.allow-unauthenticated", "yes"), "x."))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must be true or false");
        assertThat(TransportConfig.builder().allowUnauthenticated(true).build().toBuilder().build().allowUnauthenticated())
                .isTrue();
    }

    /** An IPv4 address of this host that is not loopback, when it has one (the wildcard is tested either way). */
    private static java.util.Optional<InetAddress> nonLoopbackAddress() throws SocketException {
        for (NetworkInterface nic : NetworkInterface.networkInterfaces().toList()) {
            if (nic.isUp() && !nic.isLoopback()) {
                for (InetAddress a : nic.inetAddresses().toList()) {
                    if (a instanceof Inet4Address && !a.isLoopbackAddress() && !a.isLinkLocalAddress()) {
                        return java.util.Optional.of(a);
                    }
                }
            }
        }
        return java.util.Optional.empty();
    }
}
