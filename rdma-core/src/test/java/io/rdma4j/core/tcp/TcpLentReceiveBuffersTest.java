package io.rdma4j.core.tcp;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.ReceiveBuffers;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.contract.TrackingReceiveBuffers;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Messages the tcp provider reads straight into buffers the application lent ({@link ReceiveBuffers}), and every
 * lent buffer coming back: as a received message, or through {@code release} when its message will not be delivered.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpLentReceiveBuffersTest {

    private RdmaTransport server;
    private RdmaTransport client;
    private RdmaListener listener;
    private final LinkedBlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();

    @BeforeEach
    void setUp() {
        TransportConfig config = TransportConfig.builder().provider("tcp").build();
        server = RdmaTransport.open(config);
        client = RdmaTransport.open(config);
        listener = server.listen(new InetSocketAddress("127.0.0.1", 0),
                RequestHandlers.of(7, RequestHandler.answering((body, context) -> body)), accepted::add);
    }

    @AfterEach
    void tearDown() {
        client.close();
        server.close();
    }

    @Test
    void messagesArriveInTheLentBuffersAndRequestsGiveTheirsBack() throws Exception {
        RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
        RdmaConnection served = accepted.poll(10, TimeUnit.SECONDS);
        TrackingReceiveBuffers lender = new TrackingReceiveBuffers();
        served.useReceiveBuffers(lender);
        assertThatThrownBy(() -> served.useReceiveBuffers(lender)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("once per connection");

        for (String text : List.of("first", "", "third")) {
            c.send(bytes(text)).get(10, TimeUnit.SECONDS);
        }
        for (String text : List.of("first", "", "third")) {
            ByteBuffer got = served.receive().get(10, TimeUnit.SECONDS);
            assertThat(lender.lent.contains(got)).as("the message is in a buffer the application lent").isTrue();
            assertThat(got.isReadOnly()).isFalse();
            assertThat(StandardCharsets.UTF_8.decode(got.duplicate()).toString()).isEqualTo(text);
            assertThat(lender.takeBack(got)).isTrue();
        }
        // a request is read into a lent buffer too; rdma4j keeps a copy of what it serves and gives the buffer back
        assertThat(c.request(7, bytes("ping")).get(10, TimeUnit.SECONDS)).isEqualTo(bytes("ping"));
        assertThat(lender.lent).isEmpty();
        assertThat(lender.released).isNotEmpty();
    }

    @Test
    void aMessageCutOffByThePeersEndGivesItsBufferBack() throws Exception {
        try (RawPeer peer = RawPeer.connect(listener.localAddress())) {
            peer.handshake(TcpFrameCodec.VERSION);
            RdmaConnection served = accepted.poll(10, TimeUnit.SECONDS);
            TrackingReceiveBuffers lender = new TrackingReceiveBuffers();
            served.useReceiveBuffers(lender);
            peer.send(TcpFrameCodec.encodeSendHeader(1000));
            peer.send(new byte[300]); // a message header's worth and more, then nothing
            awaitTrue(() -> lender.lent.size() == 1, "the message's buffer lent");
            peer.close();
            awaitTrue(() -> lender.lent.isEmpty() && lender.released.size() == 1, "the buffer given back");
            assertThatThrownBy(() -> served.receive().get(10, TimeUnit.SECONDS)).hasMessageContaining("closed");
        }
    }

    @Test
    void aLenderThatThrowsLeavesMessagesInRdma4jsOwnBuffers() throws Exception {
        RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
        RdmaConnection served = accepted.poll(10, TimeUnit.SECONDS);
        served.useReceiveBuffers(new ReceiveBuffers() {
            @Override
            public ByteBuffer allocate(int size) {
                throw new IllegalStateException("pool exhausted");
            }

            @Override
            public void release(ByteBuffer buffer) {
                throw new AssertionError("nothing was lent");
            }
        });
        c.send(bytes("still here")).get(10, TimeUnit.SECONDS);
        ByteBuffer got = served.receive().get(10, TimeUnit.SECONDS);
        assertThat(got.isDirect()).isFalse();
        assertThat(StandardCharsets.UTF_8.decode(got).toString()).isEqualTo("still here");
    }

    @Test
    void aLenderOfHeapBuffersFailsTheConnectionSayingWhatToLend() throws Exception {
        RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
        RdmaConnection served = accepted.poll(10, TimeUnit.SECONDS);
        served.useReceiveBuffers(new ReceiveBuffers() {
            @Override
            public ByteBuffer allocate(int size) {
                return ByteBuffer.allocate(size);
            }

            @Override
            public void release(ByteBuffer buffer) {
            }
        });
        c.send(bytes("x")).get(10, TimeUnit.SECONDS);
        assertThatThrownBy(() -> served.receive().get(10, TimeUnit.SECONDS))
                .hasStackTraceContaining("return a writable direct buffer at position 0");
    }

    private static ByteBuffer bytes(String text) {
        return ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
    }

    private static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 10 s: " + what);
            }
            Thread.sleep(5);
        }
    }
}
