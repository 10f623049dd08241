package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
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
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Request handlers on the tcp provider run on the thread that read the request, after it handed reading to a spare
 * thread: no wake-up before the handler, and a handler that blocks never stalls its connection.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ReaderThreadsTest {

    private static final int ECHO = 1;
    private static final int BLOCK = 2;
    private static final int CLOSE = 3;

    private final CountDownLatch release = new CountDownLatch(1);
    private final ConcurrentLinkedQueue<Thread> handlerThreads = new ConcurrentLinkedQueue<>();
    private Arena arena;
    private RdmaTransport server;
    private RdmaTransport client;
    private RdmaListener listener;

    @BeforeEach
    void setUp() {
        arena = Arena.ofShared();
        TransportConfig config = TransportConfig.builder().provider("tcp").build();
        server = RdmaTransport.open(config);
        client = RdmaTransport.open(config);
        RequestHandler echo = RequestHandler.answering((body, context) -> {
            handlerThreads.add(Thread.currentThread());
            return body;
        });
        RequestHandler block = RequestHandler.answering((body, context) -> {
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return body;
        });
        RequestHandler close = RequestHandler.answering((body, context) -> {
            context.connection().close();
            return body;
        });
        listener = server.listen(new InetSocketAddress("127.0.0.1", 0), RequestHandlers.of(ECHO, echo).and(BLOCK, block).and(CLOSE, close), c -> { });
    }

    @AfterEach
    void tearDown() {
        release.countDown();
        client.close();
        server.close();
        arena.close();
    }

    @Test
    void aHandlerRunsOnTheProvidersPlatformThreadNotACompletionThread() throws Exception {
        // The first request of a connection, deterministically: its reader has no spare yet and starts one. Later
        // ones may reach the new leader before the previous handler's thread is back as the spare, and then run on a
        // completion thread, as when both threads are busy.
        for (int i = 0; i < 20; i++) {
            try (RdmaConnection c = client.connect(listener.localAddress()).get()) {
                assertEquals(i, c.requestAndWait(ECHO, ByteBuffer.allocate(4).putInt(0, i)).getInt(0));
            }
        }
        assertEquals(20, handlerThreads.size());
        for (Thread t : handlerThreads) {
            assertFalse(t.isVirtual(), "handler ran on " + t);
            assertTrue(t.getName().startsWith("rdma4j-tcp-"), "handler ran on " + t);
        }
    }

    @Test
    void handlersThatBlockNeverStallTheirConnection() throws Exception {
        RdmaConnection c = client.connect(listener.localAddress()).get();
        MemorySegment published = arena.allocate(4096);
        published.set(ValueLayout.JAVA_LONG, 0, 0x5eed_cafe_f00dL);
        try (RegisteredRegion region = server.register(published, Access.remoteRead());
             RegisteredRegion sink = client.register(arena.allocate(4096), Access.readSink())) {
            // More blocked handlers than the connection has reader threads: the later ones run on completion threads.
            List<CompletableFuture<ByteBuffer>> blocked = List.of(
                    c.request(BLOCK, ByteBuffer.allocate(1).put(0, (byte) 1)),
                    c.request(BLOCK, ByteBuffer.allocate(1).put(0, (byte) 2)),
                    c.request(BLOCK, ByteBuffer.allocate(1).put(0, (byte) 3)));
            Thread.sleep(100);
            for (int i = 0; i < 10; i++) {
                assertEquals(i, c.requestAndWait(ECHO, ByteBuffer.allocate(4).putInt(0, i)).getInt(0));
                c.read(region.descriptor(), 0, sink.segment()).get(10, TimeUnit.SECONDS);
                assertEquals(0x5eed_cafe_f00dL, sink.segment().get(ValueLayout.JAVA_LONG, 0));
            }
            assertTrue(blocked.stream().noneMatch(CompletableFuture::isDone), "the blocking handlers still block");
            release.countDown();
            for (int i = 0; i < blocked.size(); i++) {
                assertEquals(i + 1, blocked.get(i).get(10, TimeUnit.SECONDS).get(0));
            }
            // The threads freed by the handlers serve on.
            assertEquals(7, c.requestAndWait(ECHO, ByteBuffer.allocate(4).putInt(0, 7)).getInt(0));
        }
    }

    @Test
    void aHandlerClosingItsOwnConnectionEndsItWithoutWaitingForItself() throws Exception {
        RdmaConnection c = client.connect(listener.localAddress()).get();
        ExecutionException e = assertThrows(ExecutionException.class,
                () -> c.request(CLOSE, ByteBuffer.allocate(1)).get(20, TimeUnit.SECONDS));
        assertInstanceOf(ConnectionClosedException.class, e.getCause());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (c.isOpen() && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertFalse(c.isOpen(), "the client sees the connection end");
    }

    @Test
    void closingWhileAHandlerBlocksReturnsWithoutWaitingForTheHandler() throws Exception {
        RdmaConnection c = client.connect(listener.localAddress()).get();
        CompletableFuture<ByteBuffer> blocked = c.request(BLOCK, ByteBuffer.allocate(1));
        Thread.sleep(100);
        long start = System.nanoTime();
        server.close(); // closes the serving side of the connection while its handler still blocks
        // Waiting for the handler would take the 10 s the close allows a reader to stop, and log a warning.
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start) < 8, "close returned while the handler blocks");
        ExecutionException e = assertThrows(ExecutionException.class, () -> blocked.get(20, TimeUnit.SECONDS));
        assertInstanceOf(ConnectionClosedException.class, e.getCause());
    }
}
