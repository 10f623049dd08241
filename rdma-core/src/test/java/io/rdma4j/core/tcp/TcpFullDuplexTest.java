package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
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
 * Two peers streaming to each other at full rate in both directions on one connection: each reads from the other's
 * region, writes into it and sends it messages, from several threads at once, so both sockets are full both ways
 * while both readers serve requests. Neither side may stop reading because it waits to write: the work ends (the
 * timeout only catches a hang) and every byte arrives as sent.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpFullDuplexTest {

    private static final int REGION = 16 << 20;
    private static final int LARGE = 1 << 20;
    private static final int THREADS = 3;
    private static final int ROUNDS = 3;
    private static final int MESSAGES_PER_ROUND = 8;
    private static final int MESSAGE = 32 << 10;

    @ParameterizedTest
    @ValueSource(strings = {"plain", "tls"})
    void peersStreamingBothWaysAtOnceNeverStall(String security) throws Exception {
        TransportConfig config = config(security);
        try (Arena arena = Arena.ofShared();
             RdmaTransport left = RdmaTransport.open(config);
             RdmaTransport right = RdmaTransport.open(config)) {
            LinkedBlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
            RdmaListener listener = right.listen(new InetSocketAddress("127.0.0.1", 0), accepted::add);
            Side l = new Side(left, arena, 1);
            Side r = new Side(right, arena, 2);
            l.connection = left.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
            r.connection = accepted.poll(10, TimeUnit.SECONDS);
            assertThat(r.connection).as("the listener accepted the connection").isNotNull();

            List<CompletableFuture<Long>> work = new ArrayList<>();
            for (Side[] pair : new Side[][] {{l, r}, {r, l}}) {
                Side self = pair[0];
                Side peer = pair[1];
                work.add(CompletableFuture.supplyAsync(() -> receiveAll(self), Thread::startVirtualThread));
                for (int t = 0; t < THREADS; t++) {
                    int thread = t;
                    work.add(CompletableFuture.supplyAsync(() -> stream(self, peer, thread), Thread::startVirtualThread));
                }
            }
            long bytes = 0;
            for (CompletableFuture<Long> w : work) {
                bytes += w.get();
            }
            long expected = 2L * THREADS * ROUNDS * (8L * LARGE + LARGE) + 2L * THREADS * ROUNDS * MESSAGES_PER_ROUND * MESSAGE;
            assertThat(bytes).as("bytes read, written and received by both sides").isEqualTo(expected);
            assertThat(l.connection.isOpen() && r.connection.isOpen()).as("both ends still open").isTrue();
        }
    }

    /** One of the two peers: its published region (every byte a function of its offset and the side) and a sink. */
    private static final class Side {
        final RegisteredRegion published;
        final RegisteredRegion inbound;
        final RegionDescriptor inboundDescriptor;
        final MemorySegment sinks;
        final int tag;
        volatile RdmaConnection connection;

        Side(RdmaTransport transport, Arena arena, int tag) {
            this.tag = tag;
            MemorySegment data = arena.allocate(REGION, 4096);
            for (long i = 0; i < REGION; i += 8) {
                data.set(ValueLayout.JAVA_LONG_UNALIGNED, i, pattern(tag, i));
            }
            published = transport.register(data, Access.remoteRead());
            inbound = transport.register(arena.allocate((long) THREADS * LARGE, 4096), Access.remoteReadWrite());
            inboundDescriptor = inbound.descriptor();
            sinks = arena.allocate((long) THREADS * 8 * LARGE, 4096);
            transport.register(sinks, Access.readSink());
        }
    }

    private static long pattern(int tag, long offset) {
        return offset * 31 + tag;
    }

    /**
     * One thread's stream to {@code peer}: per round, 8 reads of 1 MiB from its region in one batch, a write of
     * 1 MiB into its inbound region, and messages, all in flight together; the read bytes are checked.
     */
    private static long stream(Side self, Side peer, int thread) {
        RegionDescriptor remote = peer.published.descriptor();
        RegionDescriptor inbound = peer.inboundDescriptor;
        MemorySegment sink = self.sinks.asSlice((long) thread * 8 * LARGE, 8L * LARGE);
        MemorySegment source = self.published.segment().asSlice((long) thread * LARGE, LARGE);
        long moved = 0;
        for (int round = 0; round < ROUNDS; round++) {
            long from = ((long) (round * THREADS + thread) * LARGE) % (REGION - 8L * LARGE);
            List<ReadRequest> reads = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                reads.add(new ReadRequest(remote, from + (long) i * LARGE, sink.asSlice((long) i * LARGE, LARGE)));
            }
            List<CompletableFuture<Void>> inFlight = new ArrayList<>();
            inFlight.add(self.connection.readAll(reads));
            inFlight.add(self.connection.write(inbound, (long) thread * LARGE, source));
            for (int m = 0; m < MESSAGES_PER_ROUND; m++) {
                inFlight.add(self.connection.send(ByteBuffer.allocate(MESSAGE)));
            }
            CompletableFuture.allOf(inFlight.toArray(CompletableFuture[]::new)).join();
            for (long i = 0; i < 8L * LARGE; i += 4096) {
                assertThat(sink.get(ValueLayout.JAVA_LONG_UNALIGNED, i)).as("byte %d of round %d", i, round)
                        .isEqualTo(pattern(peer.tag, from + i));
            }
            moved += 8L * LARGE + LARGE;
        }
        return moved;
    }

    /** Receives the messages the peer's threads send, as fast as they come. */
    private static long receiveAll(Side self) {
        long received = 0;
        for (int i = 0; i < THREADS * ROUNDS * MESSAGES_PER_ROUND; i++) {
            try {
                received += self.connection.receive().get(60, TimeUnit.SECONDS).remaining();
            } catch (Exception e) {
                throw new AssertionError("message " + i + " did not arrive", e);
            }
        }
        return received;
    }

    private static TransportConfig config(String security) {
        TransportConfig.Builder plain = TransportConfig.builder().provider("tcp").operationTimeout(Duration.ofSeconds(60));
        if (security.equals("plain")) {
            return plain.build();
        }
        TlsStores stores = TlsStores.get();
        return plain.sharedSecret("full duplex secret")
                .providerOption("tcp.tls", "true")
                .providerOption("tcp.tls.key-store", stores.member.toString())
                .providerOption("tcp.tls.key-store-password", TlsStores.PASSWORD)
                .providerOption("tcp.tls.trust-store", stores.trust.toString())
                .providerOption("tcp.tls.trust-store-password", TlsStores.PASSWORD)
                .build();
    }
}
