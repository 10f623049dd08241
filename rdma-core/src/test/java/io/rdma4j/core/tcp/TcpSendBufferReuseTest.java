package io.rdma4j.core.tcp;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code send} is done with the caller's buffer when it returns, also when the socket cannot take the message yet.
 * With a receiver that has stopped reading (a small inbox it does not drain), the socket fills up and later messages
 * still wait to be written when their send returns: the one buffer the sender refills and scrambles around each send
 * must still deliver every message as it was when sent. (A send that wrote from the caller's buffer and copied only
 * what the socket left fails this when it copies too little.)
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpSendBufferReuseTest {

    private static final int SIZE = 64 << 10;
    private static final int COUNT = 256; // 16 MiB: more than the loopback socket buffers hold

    @Test
    void aBufferReusedRightAfterSendDeliversWhatItHeldWhenSent() throws Exception {
        TransportConfig config = TransportConfig.builder().provider("tcp").maxMessageSize(SIZE)
                .operationTimeout(Duration.ofSeconds(30)).providerOption("tcp.max-inbox-bytes", "256k").build();
        try (RdmaTransport receiver = RdmaTransport.open(config); RdmaTransport sender = RdmaTransport.open(config)) {
            LinkedBlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
            RdmaListener listener = receiver.listen(new InetSocketAddress("127.0.0.1", 0), accepted::add);
            RdmaConnection out = sender.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
            RdmaConnection in = accepted.poll(10, TimeUnit.SECONDS);
            assertThat(in).isNotNull();

            ByteBuffer reused = ByteBuffer.allocateDirect(SIZE);
            List<CompletableFuture<Void>> sent = new ArrayList<>();
            for (int m = 0; m < COUNT; m++) {
                reused.clear();
                for (int i = 0; i < SIZE; i += 4) {
                    reused.putInt(m * 31 + i);
                }
                sent.add(out.send(reused.flip()));
                reused.clear();
                while (reused.hasRemaining()) {
                    reused.put((byte) 0x5a);
                }
            }
            assertThat(sent.stream().filter(f -> !f.isDone()).count())
                    .as("messages still waiting for the socket when the last send returned").isPositive();
            for (int m = 0; m < COUNT; m++) {
                ByteBuffer got = in.receive().get(30, TimeUnit.SECONDS);
                assertThat(got.remaining()).as("message %d", m).isEqualTo(SIZE);
                for (int i = 0; i < SIZE; i += 4) {
                    if (got.getInt(got.position() + i) != m * 31 + i) {
                        throw new AssertionError("message " + m + " byte " + i + " changed after send returned");
                    }
                }
            }
            for (CompletableFuture<Void> f : sent) {
                f.get(30, TimeUnit.SECONDS);
            }
        }
    }
}
