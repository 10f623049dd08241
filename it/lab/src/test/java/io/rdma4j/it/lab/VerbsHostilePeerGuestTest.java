package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
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
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A real verbs responder on the lab device against a raw peer ({@link RawVerbsPeer}) that sends what no rdma4j peer
 * sends: each breach closes only that connection with a {@link ProtocolException}, while an honest connection
 * opened before keeps working and a new honest peer is served afterwards.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class VerbsHostilePeerGuestTest {

    private static final long WAIT = 120;
    private static final int MAX_MESSAGE = 1024;
    private static final int ECHO = RequestTypes.FIRST_APPLICATION_TYPE + 7;
    private final LabDevice device = LabDevice.current();

    @Test
    void breachesOfTheMessageProtocolCloseOnlyThatConnection() throws Exception {
        TransportConfig config = VerbsLab.config(device).toBuilder().maxMessageSize(MAX_MESSAGE).build();
        LinkedBlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
        try (Arena arena = Arena.ofShared();
             RdmaTransport server = RdmaTransport.open(config);
             RdmaTransport client = RdmaTransport.open(config)) {
            RdmaListener listener = server.listen(new InetSocketAddress(device.address(), 0),
                    RequestHandlers.of(ECHO, RequestHandler.answering((body, context) -> body)), accepted::add);
            RegisteredRegion published = server.register(filled(arena, 4096), Access.remoteRead());
            MemorySegment sink = client.register(arena.allocate(4096, 64), Access.readSink()).segment();
            RdmaConnection honest = client.connect(listener.localAddress()).get(WAIT, TimeUnit.SECONDS);
            RdmaConnection honestOnServer = accepted.poll(WAIT, TimeUnit.SECONDS);
            assertWorks(honest, honestOnServer, published, sink);

            byte[] hello = "hello".getBytes(StandardCharsets.US_ASCII);
            byte[] goodMessage = RawVerbsPeer.slot(0, RawVerbsPeer.FLAG_DATA, RawVerbsPeer.message((byte) 1, hello));
            refused(listener, accepted, goodMessage, new byte[0], "zero-length SEND", "shorter than the 8-byte");
            refused(listener, accepted, goodMessage, new byte[5], "short SEND", "5 bytes, shorter than the 8-byte");
            refused(listener, accepted, goodMessage, RawVerbsPeer.slot(0, RawVerbsPeer.FLAG_DATA, new byte[MAX_MESSAGE + 100]),
                    "oversized SEND", device.kind() == LabDevice.Kind.RXE ? "does not fit this side's receive slot" : null);
            refused(listener, accepted, goodMessage, RawVerbsPeer.slot(0, RawVerbsPeer.FLAG_DATA, RawVerbsPeer.message((byte) 9, hello)),
                    "malformed message header", "header version 9");
            refused(listener, accepted, goodMessage, RawVerbsPeer.slot(0, RawVerbsPeer.FLAG_DATA, new byte[3]),
                    "message shorter than its header", "shorter than its 16-byte header");
            refused(listener, accepted, goodMessage, RawVerbsPeer.slot(-5, RawVerbsPeer.FLAG_DATA, RawVerbsPeer.message((byte) 1, hello)),
                    "negative credits", "returned -5 credits");
            refused(listener, accepted, goodMessage, RawVerbsPeer.slot(1000, 1, new byte[0]),
                    "credits beyond the receive depth", "returned 1000 credits");
            refused(listener, accepted, goodMessage, RawVerbsPeer.slot(0, 7, new byte[0]), "unknown flag", "unknown flag 7");

            // bad connect private data: refused before any connection exists on the server
            connectRefused(listener, RawVerbsPeer.privateData(0x0BADF00D, 4096, 8), "foreign magic");
            connectRefused(listener, RawVerbsPeer.privateData(RawVerbsPeer.MAGIC_V1, 4096, 0), "receive depth 0");
            connectRefused(listener, RawVerbsPeer.privateData(RawVerbsPeer.MAGIC_V1, 4096, 100_000), "receive depth 100000");
            connectRefused(listener, RawVerbsPeer.privateData(RawVerbsPeer.MAGIC_V1, -1, 8), "negative max message size");
            connectRefused(listener, new byte[] {0x52, 0x34}, "2 bytes of private data");
            assertThat(accepted).as("connections the listener handed over for refused connects").isEmpty();

            // the progress thread survived every breach: the first honest connection still works, a new one too
            assertWorks(honest, honestOnServer, published, sink);
            RdmaConnection second = client.connect(listener.localAddress()).get(WAIT, TimeUnit.SECONDS);
            assertWorks(second, accepted.poll(WAIT, TimeUnit.SECONDS), published, sink);
        }
    }

    @Test
    void closingTheTransportFailsARequestNobodyAnswers() throws Exception {
        TransportConfig config = VerbsLab.config(device);
        LinkedBlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
        RdmaTransport server = RdmaTransport.open(config);
        try (RawVerbsPeer peer = RawVerbsPeer.connect(device.address(), listen(server, accepted),
                RawVerbsPeer.privateData(RawVerbsPeer.MAGIC_V1, 4096, 8))) {
            assertThat(peer.established()).as("raw connect: %s", peer.outcome().describe()).isTrue();
            RdmaConnection toPeer = accepted.poll(WAIT, TimeUnit.SECONDS);
            // the raw peer receives the request and never answers
            var unanswered = toPeer.request(ECHO, ByteBuffer.wrap(new byte[16]));
            Thread.sleep(200);
            assertThat(unanswered).isNotDone();
            long started = System.nanoTime();
            server.close();
            long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
            Throwable failure = failure(unanswered);
            assertThat(failure).isInstanceOf(ConnectionClosedException.class);
            assertThat(closeMillis).as("transport close with a silent peer, ms").isLessThan(20_000);
            System.out.println("[" + device.name() + "] close with an unanswered request took " + closeMillis + " ms: " + failure);
        } finally {
            server.close();
        }
    }

    // ---- helpers ----

    private static InetSocketAddress listen(RdmaTransport server, LinkedBlockingQueue<RdmaConnection> accepted) {
        return server.listen(new InetSocketAddress(LabDevice.current().address(), 0), accepted::add).localAddress();
    }

    /**
     * A raw peer connects, proves its framing with an honest message, then sends {@code breach}: the server's
     * connection closes with a ProtocolException saying {@code expected} (null: the device refuses the message
     * itself and ends the connection), and the raw peer sees the disconnect.
     */
    private void refused(RdmaListener listener, LinkedBlockingQueue<RdmaConnection> accepted, byte[] goodMessage,
                         byte[] breach, String what, String expected) throws Exception {
        try (RawVerbsPeer peer = RawVerbsPeer.connect(device.address(), listener.localAddress(),
                RawVerbsPeer.privateData(RawVerbsPeer.MAGIC_V1, 4096, 8))) {
            assertThat(peer.established()).as("%s: raw connect: %s", what, peer.outcome().describe()).isTrue();
            RdmaConnection onServer = accepted.poll(WAIT, TimeUnit.SECONDS);
            assertThat(onServer).as("%s: server side", what).isNotNull();
            peer.send(goodMessage);
            assertThat(onServer.receive().get(WAIT, TimeUnit.SECONDS)).as("%s: the honest message first", what)
                    .isEqualTo(ByteBuffer.wrap("hello".getBytes(StandardCharsets.US_ASCII)));
            peer.send(breach);
            Throwable closed = failure(onServer.receive());
            assertThat(closed).as(what).isInstanceOf(ConnectionClosedException.class);
            if (expected != null) {
                assertThat(closed.getCause()).as("%s: cause of %s", what, closed).isInstanceOf(ProtocolException.class)
                        .hasMessageContaining(expected);
            } else {
                // The device refused the message itself and tore the connection down (iWARP: TERMINATE). Which of
                // the device's reports reaches the connection first is a race: the CM's disconnect, or the queue
                // pair's error state (its asynchronous event, or the progress thread's query).
                assertThat(closed.getCause() instanceof ProtocolException).as("%s: refused by rdma4j's parser: %s", what,
                        closed.getCause()).isFalse();
                assertThat(closed).as(what).message()
                        .containsAnyOf("RDMA_CM_EVENT_DISCONNECTED", "entered the error state (");
            }
            RdmaCm.Event end = peer.awaitDisconnect((int) TimeUnit.SECONDS.toMillis(WAIT));
            assertThat(end).as("%s: the raw peer sees the disconnect", what).isNotNull();
            System.out.println("[" + device.name() + "] " + what + ": " + closed + " / cause " + closed.getCause()
                    + "; peer saw " + end.describe());
        }
    }

    private void connectRefused(RdmaListener listener, byte[] privateData, String what) {
        try (RawVerbsPeer peer = RawVerbsPeer.connect(device.address(), listener.localAddress(), privateData)) {
            assertThat(peer.established()).as("%s: connect refused, got %s", what, peer.outcome().describe()).isFalse();
            System.out.println("[" + device.name() + "] connect with " + what + ": " + peer.outcome().describe());
        }
    }

    private static void assertWorks(RdmaConnection c, RdmaConnection onServer, RegisteredRegion published,
                                    MemorySegment sink) throws Exception {
        assertThat(onServer).isNotNull();
        ByteBuffer reply = c.request(ECHO, ByteBuffer.wrap(new byte[] {1, 2, 3})).get(WAIT, TimeUnit.SECONDS);
        assertThat(reply).isEqualTo(ByteBuffer.wrap(new byte[] {1, 2, 3}));
        c.send(new byte[] {4, 5}).get(WAIT, TimeUnit.SECONDS);
        assertThat(onServer.receive().get(WAIT, TimeUnit.SECONDS)).isEqualTo(ByteBuffer.wrap(new byte[] {4, 5}));
        sink.fill((byte) 0);
        c.read(published.descriptor(), 0, sink).get(WAIT, TimeUnit.SECONDS);
        assertThat(sink.mismatch(published.segment())).isEqualTo(-1);
    }

    private static MemorySegment filled(Arena arena, int size) {
        MemorySegment s = arena.allocate(size, 64);
        for (int i = 0; i < size; i++) {
            s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
        }
        return s;
    }

    private static Throwable failure(java.util.concurrent.CompletableFuture<?> f) throws Exception {
        try {
            f.get(WAIT, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("expected a failure");
    }
}
