package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The tcp write path: frames written on the caller's (or the serving reader's) thread as far as the socket takes
 * them, the reader thread finishing what a full socket did not take, and futures completed by the caller waiting
 * on them, never by an I/O thread.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpWritePathTest {

    /** Large enough that 250 of them (62.5 MiB) exceed what loopback sockets buffer once autotuned (32 MiB and more). */
    private static final int MESSAGE = 256 * 1024;

    private Arena arena;
    private RdmaTransport server;
    private RdmaTransport client;
    private RdmaListener listener;
    private final LinkedBlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();

    @BeforeEach
    void setUp() {
        arena = Arena.ofShared();
        TransportConfig config = TransportConfig.builder().provider("tcp").maxMessageSize(MESSAGE).build();
        server = RdmaTransport.open(config);
        client = RdmaTransport.open(config);
        listener = server.listen(new InetSocketAddress("127.0.0.1", 0),
                RequestHandlers.of(7, RequestHandler.answering((body, context) -> body)), accepted::add);
    }

    @AfterEach
    void tearDown() {
        client.close();
        server.close();
        arena.close();
    }

    @Test
    void messagesTheSocketCannotTakeAtOnceArriveWholeAndInOrder() throws Exception {
        RdmaConnection c = client.connect(listener.localAddress()).get();
        RdmaConnection served = accepted.poll(10, TimeUnit.SECONDS);
        // The receiver takes nothing yet: past tcp.max-inbox-bytes its reader stops reading, the sockets fill,
        // and the sender's frames go out partly inline and partly from its reader thread once there is room.
        int count = 250; // 62.5 MiB (under the 256 operation slots), beyond the socket buffers and the 4 MiB inbox bound
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sent.add(c.send(message(i)));
        }
        Thread.sleep(200);
        assertFalse(sent.getLast().isDone(), "the last sends wait for a socket the peer does not read");
        for (int i = 0; i < count; i++) {
            ByteBuffer m = served.receive().get(30, TimeUnit.SECONDS);
            assertEquals(message(i), m, "message " + i);
        }
        for (CompletableFuture<Void> f : sent) {
            f.get(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void smallAndLargeReadsInterleaveOnOneConnectionWithTheRightBytes() throws Exception {
        long size = 8L << 20;
        MemorySegment data = arena.allocate(size, 4096);
        for (long i = 0; i < size; i += 8) {
            data.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 31 + 7);
        }
        RegionDescriptor remote = server.register(data, Access.remoteRead()).descriptor();
        RdmaConnection c = client.connect(listener.localAddress()).get();
        RegisteredRegion sink = client.register(arena.allocate(size + 65 * 64, 4096), Access.readSink());
        CompletableFuture<Void> large = c.read(remote, 0, sink.segment().asSlice(0, size));
        List<CompletableFuture<Void>> small = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            small.add(c.read(remote, i * 4096L + 8, sink.segment().asSlice(size + i * 64L, 64)));
        }
        for (int i = 0; i < 16; i++) {
            c.readAndWait(remote, i * 512L, sink.segment().asSlice(size + 64 * 64, 64));
            assertEquals(-1, sink.segment().asSlice(size + 64 * 64, 64).mismatch(data.asSlice(i * 512L, 64)));
        }
        large.get(30, TimeUnit.SECONDS);
        for (CompletableFuture<Void> f : small) {
            f.get(10, TimeUnit.SECONDS);
        }
        assertEquals(-1, sink.segment().asSlice(0, size).mismatch(data));
        for (int i = 0; i < 64; i++) {
            assertEquals(-1, sink.segment().asSlice(size + i * 64L, 64).mismatch(data.asSlice(i * 4096L + 8, 64)), "read " + i);
        }
    }

    /**
     * A burst of reads posted at once: the responder answers the requests it holds whole in one gathering write,
     * a turn per read and chunk (4 KiB chunks here, so most reads take several turns and go back in the queue), and
     * the requester's reads bring the frames behind each payload along. A request sent behind the burst is answered
     * too: the responses held for the burst go out before its handler runs.
     */
    @Test
    void aBurstOfReadsBeyondTheSocketBuffersArrivesWithTheRightBytes() throws Exception {
        try (RdmaTransport chunked = RdmaTransport.open(TransportConfig.builder().provider("tcp")
                .providerOption("tcp.chunk-size", "4096").build())) {
            long size = 4L << 20;
            MemorySegment data = arena.allocate(size, 4096);
            for (long i = 0; i < size; i += 8) {
                data.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 17 + 3);
            }
            RegionDescriptor remote = chunked.register(data, Access.remoteRead()).descriptor();
            RdmaListener burstListener = chunked.listen(new InetSocketAddress("127.0.0.1", 0),
                    RequestHandlers.of(7, RequestHandler.answering((body, context) -> body)));
            RdmaConnection c = client.connect(burstListener.localAddress()).get();
            int reads = 200;
            long[] offsets = new long[reads];
            int[] lengths = new int[reads];
            List<ReadRequest> burst = new ArrayList<>();
            long sinkSize = 0;
            for (int i = 0; i < reads; i++) {
                lengths[i] = i % 5 == 0 ? 1 + i : i % 5 == 1 ? 4096 : 20_000 + i * 997; // 14 MB in all
                offsets[i] = (i * 65_537L) % (size - lengths[i]);
                sinkSize += lengths[i];
            }
            RegisteredRegion sink = client.register(arena.allocate(sinkSize, 4096), Access.readSink());
            long at = 0;
            for (int i = 0; i < reads; i++) {
                burst.add(new ReadRequest(remote, offsets[i], sink.segment().asSlice(at, lengths[i])));
                at += lengths[i];
            }
            CompletableFuture<Void> done = c.readAll(burst);
            ByteBuffer reply = c.request(7, ByteBuffer.wrap(new byte[] {42})).get(30, TimeUnit.SECONDS);
            assertEquals(ByteBuffer.wrap(new byte[] {42}), reply);
            done.get(30, TimeUnit.SECONDS);
            at = 0;
            for (int i = 0; i < reads; i++) {
                assertEquals(-1, sink.segment().asSlice(at, lengths[i]).mismatch(data.asSlice(offsets[i], lengths[i])), "read " + i);
                at += lengths[i];
            }
            assertTrue(c.isOpen());
        }
    }

    @Test
    void callbacksRunOffTheConnectionsThreadsEvenWhileACallerWaits() throws Exception {
        MemorySegment data = arena.allocate(4096, 64);
        RegionDescriptor remote = server.register(data, Access.remoteRead()).descriptor();
        RdmaConnection c = client.connect(listener.localAddress()).get();
        RegisteredRegion sink = client.register(arena.allocate(4096, 64), Access.readSink());
        for (int i = 0; i < 200; i++) {
            CompletableFuture<String> callbackThread = new CompletableFuture<>();
            CountDownLatch attached = new CountDownLatch(1);
            CompletableFuture<Void> read = c.read(remote, 0, sink.segment().asSlice(0, 64));
            Thread other = Thread.ofPlatform().start(() -> {
                read.thenRun(() -> callbackThread.complete(Thread.currentThread().getName()));
                attached.countDown();
            });
            read.get(10, TimeUnit.SECONDS); // this caller waits: it may complete the future itself
            other.join();
            attached.await();
            String name = callbackThread.get(10, TimeUnit.SECONDS);
            assertFalse(name.startsWith("rdma4j-tcp-"), "callback ran on " + name);

            CompletableFuture<ByteBuffer> reply = c.request(7, ByteBuffer.wrap(new byte[] {(byte) i}));
            CompletableFuture<String> replyThread = reply.thenApply(r -> Thread.currentThread().getName());
            assertEquals(ByteBuffer.wrap(new byte[] {(byte) i}), reply.join());
            assertFalse(replyThread.get(10, TimeUnit.SECONDS).startsWith("rdma4j-tcp-"));
        }
        assertTrue(c.isOpen());
    }

    /**
     * Sends held back for {@code more} go out at the end of the run, and before their sender would wait for an
     * operation slot: they hold slots that only their writing frees, so a sender waiting first would wait for itself.
     */
    @Test
    void sendsHeldForMoreGoOutWithTheRunsEndAndBeforeTheSenderWaitsForASlot() throws Exception {
        RdmaTransport few = RdmaTransport.open(TransportConfig.builder().provider("tcp").maxOutstandingOperations(4).build());
        try {
            RdmaConnection c = few.connect(listener.localAddress()).get();
            RdmaConnection served = accepted.poll(10, TimeUnit.SECONDS);
            List<CompletableFuture<Void>> sent = new ArrayList<>();
            for (int i = 0; i < 20; i++) { // five times the slots, from one thread, never flushed by hand
                sent.add(c.sendInPlace(ByteBuffer.allocateDirect(64).putInt(0, i), Runnable::run, true));
            }
            c.flushSends();
            for (int i = 0; i < 20; i++) {
                assertEquals(i, served.receive().get(10, TimeUnit.SECONDS).getInt(0), "message " + i);
                sent.get(i).get(10, TimeUnit.SECONDS);
            }
            CompletableFuture<Void> held = c.sendInPlace(ByteBuffer.allocateDirect(64).putInt(0, 20), Runnable::run, true);
            c.sendInPlace(ByteBuffer.allocateDirect(64).putInt(0, 21), Runnable::run, false).get(10, TimeUnit.SECONDS);
            assertTrue(held.isDone(), "a send without more writes what was held before it");
            assertEquals(20, served.receive().get(10, TimeUnit.SECONDS).getInt(0));
            assertEquals(21, served.receive().get(10, TimeUnit.SECONDS).getInt(0));
        } finally {
            few.close();
        }
    }

    private static ByteBuffer message(int i) {
        ByteBuffer b = ByteBuffer.allocate(MESSAGE);
        for (int j = 0; j < MESSAGE; j += 4) {
            b.putInt(j, i * 1_000_003 + j);
        }
        return b;
    }
}
