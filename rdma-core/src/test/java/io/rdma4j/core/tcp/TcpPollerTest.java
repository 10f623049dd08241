package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ConnectionPoller;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Connections read on an event loop's thread ({@link ConnectionPoller} over the tcp provider): messages of every
 * size arrive whole and in order, and peers that stop mid-frame, send garbage, close, or meet a loop that stopped
 * polling never stall the loop nor lose a frame.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpPollerTest {

    private static final InetSocketAddress LOOPBACK = new InetSocketAddress("127.0.0.1", 0);
    private static final int[] SIZES = {1, 64, 4000, 4081, 5000, 65536};

    private final List<AutoCloseable> closeables = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (AutoCloseable c : closeables.reversed()) {
            c.close();
        }
    }

    private RdmaTransport open() {
        RdmaTransport t = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        closeables.add(t);
        return t;
    }

    /** An event loop: one thread that polls and runs the tasks handed to it. */
    private static final class Loop implements Executor, AutoCloseable {
        final ConnectionPoller poller;
        final Thread thread;
        final AtomicLong polls = new AtomicLong();
        private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
        private volatile boolean stop;

        Loop(RdmaTransport transport) {
            poller = transport.openPoller();
            thread = Thread.ofPlatform().name("test-loop").start(() -> {
                while (!stop) {
                    Runnable r;
                    while ((r = tasks.poll()) != null) {
                        r.run();
                    }
                    poller.poll(tasks.isEmpty() ? TimeUnit.MILLISECONDS.toNanos(100) : 0);
                    polls.incrementAndGet();
                }
                poller.close();
            });
        }

        @Override
        public void execute(Runnable task) {
            tasks.add(task);
            if (Thread.currentThread() != thread) {
                poller.wakeup();
            }
        }

        boolean attach(RdmaConnection c) throws Exception {
            CompletableFuture<Boolean> attached = new CompletableFuture<>();
            execute(() -> attached.complete(poller.attach(c)));
            return attached.get(10, TimeUnit.SECONDS);
        }

        @Override
        public void close() throws InterruptedException {
            stop = true;
            poller.wakeup();
            thread.join(10_000);
        }
    }

    private Loop loop(RdmaTransport transport) {
        Loop l = new Loop(transport);
        closeables.add(l);
        return l;
    }

    private static ByteBuffer message(int seq, int size) {
        ByteBuffer b = ByteBuffer.allocate(size);
        for (int i = 0; i < size; i++) {
            b.put((byte) (seq * 31 + i));
        }
        return b.flip();
    }

    private static void assertMessage(ByteBuffer got, int seq, int size) {
        assertThat(got.remaining()).as("size of message " + seq).isEqualTo(size);
        for (int i = 0; i < size; i++) {
            if (got.get(got.position() + i) != (byte) (seq * 31 + i)) {
                throw new AssertionError("message " + seq + " differs at byte " + i);
            }
        }
    }

    /** Receives {@code count} messages on {@code loop} and checks each; counts those read on the loop's thread. */
    private static void receiveAll(RdmaConnection c, Loop loop, int count, AtomicInteger readByLoop) throws Exception {
        for (int seq = 0; seq < count; seq++) {
            ByteBuffer got = c.receive(task -> {
                if (Thread.currentThread() == loop.thread) {
                    readByLoop.incrementAndGet();
                }
                loop.execute(task);
            }).get(20, TimeUnit.SECONDS);
            assertMessage(got, seq, SIZES[seq % SIZES.length]);
        }
    }

    private record Pair(RdmaConnection client, RdmaConnection server) {
    }

    private Pair connect(RdmaTransport client, RdmaListener listener, BlockingQueue<RdmaConnection> accepted) throws Exception {
        RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS);
        closeables.add(c);
        RdmaConnection s = accepted.poll(10, TimeUnit.SECONDS);
        assertThat(s).isNotNull();
        closeables.add(s);
        return new Pair(c, s);
    }

    /** A listening transport with an event loop that polls for it. */
    private record Server(RdmaTransport transport, BlockingQueue<RdmaConnection> accepted, RdmaListener listener, Loop loop) {
    }

    private Server server() {
        RdmaTransport t = open();
        BlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
        RdmaListener listener = t.listen(LOOPBACK, accepted::add);
        return new Server(t, accepted, listener, loop(t));
    }

    /** A connection from {@code client}, its server side attached to the server's loop. */
    private Pair attachedPair(Server s, RdmaTransport client) throws Exception {
        Pair p = connect(client, s.listener(), s.accepted());
        assertThat(s.loop().attach(p.server())).isTrue();
        return p;
    }

    @Test
    void messagesOfEverySizeArriveWholeAndInOrderThroughTheLoop() throws Exception {
        Server s = server();
        Loop loop = s.loop();
        Pair p = attachedPair(s, open());
        int count = 3000;
        CompletableFuture<Void> sent = CompletableFuture.runAsync(() -> {
            for (int seq = 0; seq < count; seq++) {
                p.client().send(message(seq, SIZES[seq % SIZES.length])).join();
            }
        });
        AtomicInteger readByLoop = new AtomicInteger();
        receiveAll(p.server(), loop, count, readByLoop);
        sent.get(20, TimeUnit.SECONDS);
        assertThat(readByLoop.get()).as("messages the loop's thread read itself").isPositive();
        // and the other way, the loop's side sending
        p.server().send(message(0, 100)).get(10, TimeUnit.SECONDS);
        assertMessage(p.client().receive().get(10, TimeUnit.SECONDS), 0, 100);
    }

    @Test
    void aPeerStoppingMidFrameHoldsUpNeitherTheLoopNorItsOtherConnections() throws Exception {
        Server s = server();
        Loop loop = s.loop();
        try (RawPeer stalling = RawPeer.connect(s.listener().localAddress())) {
            stalling.handshake(TcpFrameCodec.VERSION);
            RdmaConnection stalled = s.accepted().poll(10, TimeUnit.SECONDS);
            closeables.add(stalled);
            assertThat(loop.attach(stalled)).isTrue();
            CompletableFuture<ByteBuffer> never = stalled.receive();
            // a message promised 60000 bytes long, 10 of them sent; then nothing
            stalling.send(TcpFrameCodec.encodeSendHeader(60_000));
            stalling.send(new byte[10]);

            Pair p = attachedPair(s, open());
            long pollsBefore = loop.polls.get();
            CompletableFuture<Void> sent = CompletableFuture.runAsync(() -> {
                for (int seq = 0; seq < 300; seq++) {
                    p.client().send(message(seq, SIZES[seq % SIZES.length])).join();
                }
            });
            receiveAll(p.server(), loop, 300, new AtomicInteger());
            sent.get(20, TimeUnit.SECONDS);
            assertThat(loop.polls.get()).as("the loop kept polling").isGreaterThan(pollsBefore);
            assertThat(never).isNotDone();

            stalling.close();
            assertThatThrownBy(() -> never.get(20, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .hasCauseInstanceOf(ConnectionClosedException.class);
        }
        eventually("the half-read message's bytes are given back", () -> s.transport().metrics().bufferedBytes() == 0);
    }

    @Test
    void aMalformedFrameReadOnTheLoopEndsOnlyItsConnection() throws Exception {
        Server s = server();
        Loop loop = s.loop();
        Pair p = attachedPair(s, open());
        long rejectedBefore = s.transport().metrics().rejectedRequests();
        try (RawPeer hostile = RawPeer.connect(s.listener().localAddress())) {
            hostile.handshake(TcpFrameCodec.VERSION);
            RdmaConnection h = s.accepted().poll(10, TimeUnit.SECONDS);
            closeables.add(h);
            assertThat(loop.attach(h)).isTrue();
            // a keep-alive first (read by a reader thread, which then leaves reading to the loop), then garbage
            hostile.send(TcpFrameCodec.encodeEmpty(TcpFrameCodec.PING, 0));
            Thread.sleep(100);
            hostile.send(new byte[]{99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
            assertThat(hostile.closedByPeer()).isTrue();
            assertThatThrownBy(() -> h.receive().get(20, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .cause().hasMessageContaining("unknown frame type 99");
        }
        eventually("the protocol violation is counted", () -> s.transport().metrics().rejectedRequests() > rejectedBefore);
        p.client().send(message(0, SIZES[0])).get(10, TimeUnit.SECONDS);
        receiveAll(p.server(), loop, 1, new AtomicInteger());
    }

    @Test
    void whileTheLoopDoesNotPollReaderThreadsReadAndSeeTheClose() throws Exception {
        Server s = server();
        Loop loop = s.loop();
        Pair p = attachedPair(s, open());
        p.client().send(message(0, SIZES[0])).get(10, TimeUnit.SECONDS);
        receiveAll(p.server(), loop, 1, new AtomicInteger()); // the loop leads from here on

        CountDownLatch blocked = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        loop.execute(() -> {
            blocked.countDown();
            try {
                release.await(30, TimeUnit.SECONDS); // a handler that blocks its loop
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertThat(blocked.await(10, TimeUnit.SECONDS)).isTrue();
        try {
            for (int seq = 0; seq < 20; seq++) {
                p.client().send(message(seq, SIZES[seq % SIZES.length])).get(10, TimeUnit.SECONDS);
            }
            for (int seq = 0; seq < 20; seq++) {
                assertMessage(p.server().receive().get(20, TimeUnit.SECONDS), seq, SIZES[seq % SIZES.length]);
            }
            p.client().close();
            CompletableFuture<ByteBuffer> after = p.server().receive();
            assertThatThrownBy(() -> after.get(20, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .hasCauseInstanceOf(ConnectionClosedException.class);
        } finally {
            release.countDown();
        }
    }

    @Test
    void manyConnectionsShareOneLoopAndClosingItGivesThemBackToReaderThreads() throws Exception {
        Server s = server();
        Loop loop = s.loop();
        RdmaTransport client = open();
        List<Pair> pairs = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            Pair p = attachedPair(s, client);
            pairs.add(p);
        }
        int each = 12;
        List<CompletableFuture<Void>> sends = new ArrayList<>();
        for (Pair p : pairs) {
            sends.add(CompletableFuture.runAsync(() -> {
                for (int seq = 0; seq < each; seq++) {
                    p.client().send(message(seq, SIZES[seq % SIZES.length])).join();
                }
            }));
        }
        AtomicInteger readByLoop = new AtomicInteger();
        for (Pair p : pairs) {
            receiveAll(p.server(), loop, each, readByLoop);
        }
        CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).get(20, TimeUnit.SECONDS);
        assertThat(readByLoop.get()).isPositive();

        loop.close(); // its poller closes: every connection is read by reader threads again
        for (Pair p : pairs) {
            p.client().send(message(0, 64)).get(10, TimeUnit.SECONDS);
            assertMessage(p.server().receive().get(20, TimeUnit.SECONDS), 0, 64);
        }
    }

    private static void eventually(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime()).as("timed out waiting until " + what).isLessThan(deadline);
            Thread.sleep(10);
        }
    }
}
