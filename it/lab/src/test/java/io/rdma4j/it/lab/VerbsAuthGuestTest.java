package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.nativeloader.RdmaCm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code shared-secret} on the verbs provider over a real device: peers with the same secret connect and use the
 * control channel and RDMA READ; a wrong secret, a secret on one side only, a raw peer that never proves it, one
 * that sends data first and one that sends a wrong proof are refused, and the listener goes on serving honest peers
 * without ever handing a refused connection to its accept callback.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class VerbsAuthGuestTest {

    private static final long WAIT = 120;
    private static final String SECRET = "the lab's secret, 16+ bytes";
    private static final int ECHO = RequestTypes.FIRST_APPLICATION_TYPE + 7;
    private final LabDevice device = LabDevice.current();

    @Test
    void theSameSecretConnectsAndTheControlChannelAndReadWork() throws Exception {
        try (Arena arena = Arena.ofShared(); Server s = Server.open(device, secret(SECRET));
             RdmaTransport client = RdmaTransport.open(secret(SECRET))) {
            RdmaConnection c = client.connect(s.address()).get(WAIT, TimeUnit.SECONDS);
            assertWorks(c, s.accepted.poll(WAIT, TimeUnit.SECONDS), s.published(arena), sink(client, arena));
            assertThat(s.transport.metrics().rejectedRequests()).isZero();
        }
    }

    @Test
    void aWrongSecretFailsTheConnectorAndTheListenerServesTheNextPeer() throws Exception {
        try (Arena arena = Arena.ofShared(); Server s = Server.open(device, secret(SECRET));
             RdmaTransport wrong = RdmaTransport.open(secret("another secret of 16+ bytes"));
             RdmaTransport right = RdmaTransport.open(secret(SECRET))) {
            Throwable failure = failure(wrong.connect(s.address()));
            assertThat(failure).isInstanceOf(AuthenticationException.class).hasMessageContaining("shared-secret")
                    .hasMessageNotContaining(SECRET);
            System.out.println("[" + device.name() + "] wrong secret: " + failure);
            RdmaConnection c = right.connect(s.address()).get(WAIT, TimeUnit.SECONDS);
            RdmaConnection onServer = s.accepted.poll(WAIT, TimeUnit.SECONDS);
            assertWorks(c, onServer, s.published(arena), sink(right, arena));
            assertThat(s.accepted).as("connections handed over besides the honest one").isEmpty();
            assertThat(s.transport.metrics().rejectedRequests()).as("refused peers counted").isEqualTo(1);
        }
    }

    @Test
    void aSecretOnOneSideOnlyFailsBothWays() throws Exception {
        try (Server s = Server.open(device, secret(null)); RdmaTransport client = RdmaTransport.open(secret(SECRET))) {
            Throwable failure = failure(client.connect(s.address()));
            assertThat(failure).isInstanceOf(AuthenticationException.class)
                    .hasMessageContaining("has no shared secret configured")
                    .hasMessageContaining("configure the same shared-secret on both sides");
            System.out.println("[" + device.name() + "] secret on the connector only: " + failure);
            Thread.sleep(1000);
            assertThat(s.accepted).isEmpty();
        }
        try (Server s = Server.open(device, secret(SECRET)); RdmaTransport client = RdmaTransport.open(secret(null))) {
            Throwable failure = failure(client.connect(s.address()));
            assertThat(failure).isInstanceOf(AuthenticationException.class)
                    .hasMessageContaining("requires a shared secret")
                    .hasMessageContaining("configure the same shared-secret on this side");
            System.out.println("[" + device.name() + "] secret on the listener only: " + failure);
            Thread.sleep(1000);
            assertThat(s.accepted).isEmpty();
        }
    }

    @Test
    void aRawPeerThatNeverProvesIsClosedAfterTheConnectTimeout() throws Exception {
        Duration timeout = Duration.ofSeconds(3);
        try (Server s = Server.open(device, secret(SECRET).toBuilder().connectTimeout(timeout).build());
             RawVerbsPeer peer = RawVerbsPeer.connect(device.address(), s.address(),
                     RawVerbsPeer.privateDataV2(4096, 8, RawVerbsPeer.CONNECT_FLAG_AUTH, nonce()))) {
            assertThat(peer.established()).as("raw connect: %s", peer.outcome().describe()).isTrue();
            ByteBuffer accept = ByteBuffer.wrap(peer.outcome().privateData());
            assertThat(accept.getInt()).as("the listener's private data: version 2").isEqualTo(RawVerbsPeer.MAGIC_V2);
            assertThat(accept.getInt(12) & RawVerbsPeer.CONNECT_FLAG_AUTH).as("it requires a proof").isNotZero();
            long started = System.nanoTime();
            RdmaCm.Event end = peer.awaitDisconnect((int) TimeUnit.SECONDS.toMillis(WAIT));
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
            assertThat(end).as("the silent peer is disconnected").isNotNull();
            assertThat(millis).as("closed after the connect timeout, ms").isGreaterThanOrEqualTo(timeout.toMillis() - 500);
            assertThat(peer.receivedMessages()).as("messages the listener sent the unproven peer").isZero();
            assertThat(s.accepted).isEmpty();
            assertThat(s.transport.metrics().rejectedRequests()).isEqualTo(1);
            System.out.println("[" + device.name() + "] silent peer closed after " + millis + " ms: " + end.describe());
        }
    }

    @Test
    void aRawPeerSendingDataOrAWrongProofFirstIsClosed() throws Exception {
        byte[] hello = RawVerbsPeer.slot(0, RawVerbsPeer.FLAG_DATA,
                RawVerbsPeer.message((byte) 1, "hello".getBytes(StandardCharsets.US_ASCII)));
        byte[] wrongProof = RawVerbsPeer.slot(0, RawVerbsPeer.FLAG_PROOF, new byte[32]);
        byte[] shortProof = RawVerbsPeer.slot(0, RawVerbsPeer.FLAG_PROOF, new byte[5]);
        try (Arena arena = Arena.ofShared();
             Server s = Server.open(device, secret(SECRET).toBuilder().connectTimeout(Duration.ofSeconds(100)).build());
             RdmaTransport honest = RdmaTransport.open(secret(SECRET))) {
            for (byte[] first : new byte[][] {hello, wrongProof, shortProof}) {
                try (RawVerbsPeer peer = RawVerbsPeer.connect(device.address(), s.address(),
                        RawVerbsPeer.privateDataV2(4096, 8, RawVerbsPeer.CONNECT_FLAG_AUTH, nonce()))) {
                    assertThat(peer.established()).as("raw connect: %s", peer.outcome().describe()).isTrue();
                    long started = System.nanoTime();
                    peer.send(first);
                    RdmaCm.Event end = peer.awaitDisconnect((int) TimeUnit.SECONDS.toMillis(WAIT));
                    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
                    assertThat(end).as("the peer is disconnected").isNotNull();
                    assertThat(millis).as("closed for what it sent, not at the 100 s timeout").isLessThan(60_000);
                    assertThat(peer.receivedMessages()).isZero();
                    System.out.println("[" + device.name() + "] raw peer sending " + (first == hello ? "data" : first == wrongProof
                            ? "a wrong proof" : "a short proof") + " first: closed after " + millis + " ms: " + end.describe());
                }
            }
            assertThat(s.accepted).isEmpty();
            assertThat(s.transport.metrics().rejectedRequests()).as("wrong and short proofs counted").isEqualTo(2);
            RdmaConnection c = honest.connect(s.address()).get(WAIT, TimeUnit.SECONDS);
            assertWorks(c, s.accepted.poll(WAIT, TimeUnit.SECONDS), s.published(arena), sink(honest, arena));
        }
    }

    // ---- helpers ----

    private TransportConfig secret(String secret) {
        return VerbsLab.config(device).toBuilder().sharedSecret(secret).build();
    }

    /** A listening transport with an echo handler; what its accept callback got is in {@link #accepted}. */
    private record Server(RdmaTransport transport, RdmaListener listener, LinkedBlockingQueue<RdmaConnection> accepted)
            implements AutoCloseable {

        static Server open(LabDevice device, TransportConfig config) {
            RdmaTransport t = RdmaTransport.open(config);
            LinkedBlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
            RdmaListener l = t.listen(new InetSocketAddress(device.address(), 0),
                    RequestHandlers.of(ECHO, RequestHandler.answering((body, context) -> body)), accepted::add);
            return new Server(t, l, accepted);
        }

        InetSocketAddress address() {
            return listener.localAddress();
        }

        RegisteredRegion published(Arena arena) {
            MemorySegment m = arena.allocate(4096, 64);
            for (int i = 0; i < 4096; i++) {
                m.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
            }
            return transport.register(m, Access.remoteRead());
        }

        @Override
        public void close() {
            transport.close();
        }
    }

    private static MemorySegment sink(RdmaTransport client, Arena arena) {
        return client.register(arena.allocate(4096, 64), Access.readSink()).segment();
    }

    private static byte[] nonce() {
        byte[] n = new byte[16];
        new SecureRandom().nextBytes(n);
        return n;
    }

    private static void assertWorks(RdmaConnection c, RdmaConnection onServer, RegisteredRegion published,
                                    MemorySegment sink) throws Exception {
        assertThat(onServer).as("the listener's accept callback got the connection").isNotNull();
        ByteBuffer reply = c.request(ECHO, ByteBuffer.wrap(new byte[] {1, 2, 3})).get(WAIT, TimeUnit.SECONDS);
        assertThat(reply).isEqualTo(ByteBuffer.wrap(new byte[] {1, 2, 3}));
        c.send(new byte[] {4, 5}).get(WAIT, TimeUnit.SECONDS);
        assertThat(onServer.receive().get(WAIT, TimeUnit.SECONDS)).isEqualTo(ByteBuffer.wrap(new byte[] {4, 5}));
        onServer.send(new byte[] {6}).get(WAIT, TimeUnit.SECONDS);
        assertThat(c.receive().get(WAIT, TimeUnit.SECONDS)).isEqualTo(ByteBuffer.wrap(new byte[] {6}));
        sink.fill((byte) 0);
        c.read(published.descriptor(), 0, sink).get(WAIT, TimeUnit.SECONDS);
        assertThat(sink.mismatch(published.segment())).isEqualTo(-1);
    }

    private static Throwable failure(CompletableFuture<?> f) throws Exception {
        try {
            f.get(WAIT, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("expected a failure");
    }
}
