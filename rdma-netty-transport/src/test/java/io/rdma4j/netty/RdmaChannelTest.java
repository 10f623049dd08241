package io.rdma4j.netty;

import io.rdma4j.netty.leaks.NettyLeaks;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelPromise;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelOutputShutdownEvent;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.ReferenceCountUtil;
import io.rdma4j.core.ProtectedModeException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What Netty's suite cannot check here: half-close against a peer that speaks rdma4j directly (the suite's own
 * shutdown tests use plain sockets as the peer), large writes with back-pressure, rdma4j's protected mode and shared
 * secret, and the options.
 */
class RdmaChannelTest {

    private static final InetSocketAddress LOOPBACK = new InetSocketAddress("127.0.0.1", 0);

    private static RdmaTransport serverTransport;
    private static RdmaTransport clientTransport;
    private static EventLoopGroup serverGroup;
    private static EventLoopGroup clientGroup;

    @BeforeAll
    static void open() {
        serverTransport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        clientTransport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        serverGroup = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory(serverTransport));
        clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(clientTransport));
    }

    @AfterAll
    static void close() throws InterruptedException {
        clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        clientTransport.close();
        serverTransport.close();
    }

    @Test
    void shutdownOutputEndsThePeersInputAndTheChannelStillReads() throws Exception {
        BlockingQueue<ByteBuffer> atPeer = new LinkedBlockingQueue<>();
        AtomicReference<RdmaConnection> peer = new AtomicReference<>();
        CountDownLatch accepted = new CountDownLatch(1);
        try (RdmaListener listener = serverTransport.listen(LOOPBACK, c -> {
            peer.set(c);
            accepted.countDown();
        })) {
            BlockingQueue<Object> atChannel = new LinkedBlockingQueue<>();
            SocketChannel ch = (SocketChannel) new Bootstrap().group(clientGroup).channel(RdmaSocketChannel.class)
                    .option(ChannelOption.ALLOW_HALF_CLOSURE, true)
                    .handler(recorder(atChannel)).connect(listener.localAddress()).sync().channel();
            assertThat(accepted.await(10, TimeUnit.SECONDS)).isTrue();
            RdmaConnection p = peer.get();

            ch.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {1})).sync();
            assertThat(p.receive().get(10, TimeUnit.SECONDS).get()).isEqualTo((byte) 1);
            assertThat(ch.isOutputShutdown()).isFalse();

            ch.shutdownOutput().sync();
            assertThat(ch.isOutputShutdown()).isTrue();
            assertThat(ch.isInputShutdown()).isFalse();
            assertThat(ch.isActive()).isTrue();
            assertThat(p.receive().get(10, TimeUnit.SECONDS).remaining()).as("the end of stream: an empty message").isZero();
            assertThatThrownBy(() -> ch.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {2})).sync())
                    .isInstanceOf(java.nio.channels.ClosedChannelException.class);

            assertThat(atChannel.poll(10, TimeUnit.SECONDS)).isEqualTo(ChannelOutputShutdownEvent.INSTANCE);
            p.send(new byte[] {7, 8}).get(10, TimeUnit.SECONDS);
            assertThat(atChannel.poll(10, TimeUnit.SECONDS)).isEqualTo("data:0708");
            ch.close().sync();
        }
    }

    @Test
    void thePeersEndOfStreamShutsTheInputAndTheChannelStillWrites() throws Exception {
        BlockingQueue<Object> atServer = new LinkedBlockingQueue<>();
        Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childOption(ChannelOption.ALLOW_HALF_CLOSURE, true)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(recorder(atServer));
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
                                if (evt == ChannelInputShutdownEvent.INSTANCE) {
                                    ctx.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {9}));
                                }
                            }
                        });
                    }
                }).bind(LOOPBACK).sync().channel();
        try (RdmaConnection peer = clientTransport.connect((InetSocketAddress) server.localAddress()).get(10, TimeUnit.SECONDS)) {
            peer.send(new byte[] {1, 2, 3}).get(10, TimeUnit.SECONDS);
            peer.send(new byte[0]).get(10, TimeUnit.SECONDS); // end of stream
            assertThat(atServer.poll(10, TimeUnit.SECONDS)).isEqualTo("data:010203");
            assertThat(atServer.poll(10, TimeUnit.SECONDS)).isEqualTo(ChannelInputShutdownEvent.INSTANCE);
            assertThat(peer.receive().get(10, TimeUnit.SECONDS).get()).as("written after the input ended").isEqualTo((byte) 9);
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aLargeWriteArrivesWholeAndAReaderThatStopsHoldsTheWriterBack() throws Exception {
        byte[] data = new byte[8 << 20];
        new Random(43).nextBytes(data);
        Sink sink = new Sink(data.length);
        Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childOption(ChannelOption.AUTO_READ, false).childHandler(sink).bind(LOOPBACK).sync().channel();
        try {
            Channel ch = new Bootstrap().group(clientGroup).channel(RdmaSocketChannel.class)
                    .option(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(64 << 10, 256 << 10))
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            assertThat(sink.active(10)).isTrue();
            ChannelFuture written = ch.writeAndFlush(Unpooled.wrappedBuffer(data));
            // The reader reads nothing yet: rdma4j's bounds stop the data, the send window fills, the rest stays
            // in the writer's outbound buffer and the channel turns unwritable.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (ch.isWritable() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(ch.isWritable()).as("writable while the peer reads nothing").isFalse();
            assertThat(written.isDone()).isFalse();

            sink.child().read();
            assertThat(sink.all(30)).isTrue();
            assertThat(written.sync().isSuccess()).isTrue();
            assertThat(ch.isWritable()).isTrue();
            assertThat(sink.received()).isEqualTo(data);
            ch.close().sync();
        } finally {
            server.close().sync();
        }
    }

    /**
     * Writes sent in place and writes copied into messages behind them, thousands of small ones, and a file region:
     * the peer gets every byte in the order written, and the promises complete in that order, whenever the sends
     * complete.
     */
    @Test
    void writesSentInPlaceAndCopiedArriveAndCompleteInTheOrderWritten() throws Exception {
        Random random = new Random(45);
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        List<Object> writes = new ArrayList<>();
        for (int round = 0; round < 3; round++) {
            byte[] large = new byte[(3 << 20) + round];
            random.nextBytes(large);
            writes.add(large);
            for (int i = 0; i < 3000; i++) {
                writes.add(new byte[] {(byte) i, (byte) (i >> 8), (byte) round});
            }
        }
        byte[] regionBytes = new byte[200_000];
        random.nextBytes(regionBytes);
        Path file = Files.createTempFile("rdma4j-region", ".bin");
        Files.write(file, regionBytes);
        writes.add(1 + writes.size() / 2, regionBytes);
        writes.forEach(w -> expected.writeBytes((byte[]) w));
        int total = expected.size();

        Sink sink = new Sink(total);
        Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childOption(ChannelOption.AUTO_READ, false).childHandler(sink).bind(LOOPBACK).sync().channel();
        try (FileChannel region = FileChannel.open(file)) {
            Channel ch = new Bootstrap().group(clientGroup).channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            assertThat(sink.active(10)).isTrue();
            List<Integer> completed = new CopyOnWriteArrayList<>();
            CountDownLatch listened = new CountDownLatch(writes.size());
            List<ChannelFuture> futures = new ArrayList<>();
            for (int i = 0; i < writes.size(); i++) {
                byte[] w = (byte[]) writes.get(i);
                Object msg = w == regionBytes ? new DefaultFileRegion(region, 0, w.length)
                        : w.length > 3 ? PooledByteBufAllocator.DEFAULT.directBuffer(w.length).writeBytes(w)
                        : Unpooled.wrappedBuffer(w);
                int index = i;
                ChannelPromise promise = ch.newPromise();
                promise.addListener(f -> {
                    completed.add(index);
                    listened.countDown();
                });
                futures.add(ch.write(msg, promise));
            }
            ch.flush();
            sink.child().read(); // the reader starts once everything is handed over or waits in the outbound buffer
            assertThat(sink.all(30)).isTrue();
            // a promise wakes its waiters before it runs its listeners: wait for the listeners
            assertThat(listened.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(futures).allMatch(ChannelFuture::isSuccess);
            assertThat(sink.received()).isEqualTo(expected.toByteArray());
            assertThat(completed).hasSize(writes.size()).isSorted();
            ch.close().sync();
        } finally {
            server.close().sync();
            Files.delete(file);
        }
    }

    /**
     * A buffer sent in place is read by rdma4j (the NIC, or the tcp provider's gathering write) after the loop has
     * handed it over: its write completes only once that is done and the buffer is back, as a socket channel's write
     * completes once the kernel has copied it. A writer that then reuses the buffer does not change what was sent.
     */
    @Test
    void aWriteCompletesOnlyOnceRdma4jNoLongerReadsTheBuffer() throws Exception {
        byte[] data = new byte[1 << 20];
        new Random(44).nextBytes(data);
        Sink sink = new Sink(data.length);
        Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childHandler(sink).bind(LOOPBACK).sync().channel();
        ByteBuf buf = PooledByteBufAllocator.DEFAULT.directBuffer(data.length).writeBytes(data);
        try {
            Channel ch = new Bootstrap().group(clientGroup).channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            AtomicInteger refCntWhenWritten = new AtomicInteger(-1);
            CountDownLatch listened = new CountDownLatch(1);
            ChannelPromise written = ch.newPromise();
            // added before the write, so it runs on the loop the moment the write completes
            written.addListener(f -> {
                refCntWhenWritten.set(buf.refCnt());
                buf.setZero(0, buf.capacity());
                listened.countDown();
            });
            ch.writeAndFlush(buf.retain(), written);
            // the promise wakes its waiters before it runs its listeners: wait for the listener
            assertThat(listened.await(30, TimeUnit.SECONDS)).isTrue();
            assertThat(written.isSuccess()).isTrue();
            assertThat(sink.all(30)).isTrue();
            assertThat(refCntWhenWritten).as("references to the buffer when its write completed").hasValue(1);
            assertThat(sink.received()).isEqualTo(data);
            ch.close().sync();
        } finally {
            buf.release();
            server.close().sync();
        }
    }

    /**
     * A close while buffers sent in place are still being sent (the peer reads nothing yet) waits for those sends, as
     * a socket's close leaves what the kernel took to go out: each write either succeeded and its bytes arrive, or
     * failed because it was never handed over, and its bytes do not. So the peer receives exactly the writes that
     * succeeded, and more of them than were complete when the close began.
     */
    @Test
    void aCloseWhileSendsInPlaceAreUnderWayLetsThemCompleteAndFailsOnlyWhatNeverWent() throws Exception {
        int writes = 512;
        // one message each, so a write is handed over whole or not at all; 32 MiB in all, more than the sockets and the
        // peer's inbox hold while it does not read
        int size = 64 << 10;
        Random random = new Random(47);
        List<byte[]> data = new ArrayList<>();
        Sink sink = new Sink(Integer.MAX_VALUE);
        CountDownLatch ended = new CountDownLatch(1);
        Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childOption(ChannelOption.AUTO_READ, false).childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel child) {
                        child.pipeline().addLast(sink);
                        child.closeFuture().addListener(f -> ended.countDown());
                    }
                }).bind(LOOPBACK).sync().channel();
        AtomicInteger readAfterClose = new AtomicInteger();
        AtomicBoolean closeCalled = new AtomicBoolean();
        try {
            Channel ch = new Bootstrap().group(clientGroup).channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            if (closeCalled.get()) {
                                readAfterClose.incrementAndGet();
                            }
                            ReferenceCountUtil.release(msg);
                        }
                    }).connect(server.localAddress()).sync().channel();
            assertThat(sink.active(10)).isTrue();
            List<ChannelFuture> futures = new ArrayList<>();
            for (int i = 0; i < writes; i++) {
                byte[] d = new byte[size];
                random.nextBytes(d);
                data.add(d);
                futures.add(ch.write(PooledByteBufAllocator.DEFAULT.directBuffer(size).writeBytes(d)));
            }
            ch.flush();
            Thread.sleep(500); // the window fills; sends in place wait for the peer to read
            AtomicInteger doneAtClose = new AtomicInteger();
            ChannelFuture closed = ch.eventLoop().submit(() -> {
                doneAtClose.set((int) futures.stream().filter(ChannelFuture::isDone).count());
                closeCalled.set(true);
                return ch.close();
            }).get(10, TimeUnit.SECONDS);
            assertThat(doneAtClose.get()).as("writes complete when the close began").isLessThan(writes);
            sink.child().writeAndFlush(Unpooled.wrappedBuffer(new byte[] {1, 2, 3})).sync();
            Thread.sleep(300); // what the peer sends while the close waits does not reach the closing channel's pipeline
            assertThat(readAfterClose.get()).as("reads after close()").isZero();
            sink.child().read();
            assertThat(closed.await(30, TimeUnit.SECONDS)).isTrue();
            assertThat(ended.await(30, TimeUnit.SECONDS)).as("the peer saw the end").isTrue();
            for (ChannelFuture f : futures) {
                assertThat(f.await(10, TimeUnit.SECONDS)).isTrue();
            }
            int succeeded = (int) futures.stream().takeWhile(ChannelFuture::isSuccess).count();
            assertThat(futures.subList(succeeded, writes)).as("after the writes that went, only failures")
                    .allMatch(f -> !f.isSuccess());
            assertThat(succeeded).as("writes under way at the close completed").isGreaterThan(doneAtClose.get());
            ByteArrayOutputStream expected = new ByteArrayOutputStream();
            data.subList(0, succeeded).forEach(expected::writeBytes);
            assertThat(sink.received()).as("exactly the writes that succeeded").isEqualTo(expected.toByteArray());
        } finally {
            server.close().sync();
        }
    }

    /**
     * A close held for sends in place (the peer does not read) goes on when the channel's event loop shuts down, whose
     * timers go with it: the channel closes and every write completes, succeeded or failed, rather than waiting for a
     * timer that was cancelled.
     */
    @Test
    void aCloseWaitingForSendsInPlaceEndsWhenTheLoopShutsDown() throws Exception {
        int size = 64 << 10;
        Sink sink = new Sink(Integer.MAX_VALUE);
        Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childOption(ChannelOption.AUTO_READ, false).childHandler(sink).bind(LOOPBACK).sync().channel();
        EventLoopGroup ownGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(clientTransport));
        try {
            Channel ch = new Bootstrap().group(ownGroup).channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            assertThat(sink.active(10)).isTrue();
            List<ChannelFuture> futures = new ArrayList<>();
            for (int i = 0; i < 512; i++) {
                futures.add(ch.write(PooledByteBufAllocator.DEFAULT.directBuffer(size).writeZero(size)));
            }
            ch.flush();
            Thread.sleep(500); // the window fills; sends in place wait for the peer to read
            ch.close();
            Thread.sleep(200);
            assertThat(ch.closeFuture().isDone()).as("the close waits for the sends in place").isFalse();
            ownGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS);
            assertThat(ch.closeFuture().await(30, TimeUnit.SECONDS)).as("closed as its loop shut down").isTrue();
            for (ChannelFuture f : futures) {
                assertThat(f.await(10, TimeUnit.SECONDS)).as("every write completed").isTrue();
            }
            assertThat(futures).as("what was never handed over failed").anyMatch(f -> !f.isSuccess());
            assertThat(ownGroup.terminationFuture().await(30, TimeUnit.SECONDS)).isTrue();
        } finally {
            ownGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS);
            server.close().sync();
        }
    }

    /**
     * rdma4j reads a received message straight into a buffer of the channel's allocator (one of exactly the message's
     * size), and the pipeline gets slices of it: no received byte is copied in Java.
     */
    @Test
    void receivedBytesReachThePipelineInTheChannelsMemoryWithoutACopy() throws Exception {
        byte[] data = new byte[40_000];
        new Random(44).nextBytes(data);
        List<MemorySegment> messageBuffers = new CopyOnWriteArrayList<>();
        AbstractByteBufAllocator tracking = new AbstractByteBufAllocator(true) {
            @Override
            protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
                ByteBuf b = PooledByteBufAllocator.DEFAULT.directBuffer(initialCapacity, maxCapacity);
                if (initialCapacity == maxCapacity) { // what a channel lends for one message
                    messageBuffers.add(MemorySegment.ofBuffer(b.nioBuffer(0, initialCapacity)));
                }
                return b;
            }

            @Override
            protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
                return PooledByteBufAllocator.DEFAULT.heapBuffer(initialCapacity, maxCapacity);
            }

            @Override
            public boolean isDirectBufferPooled() {
                return true;
            }
        };
        ByteArrayOutputStream received = new ByteArrayOutputStream();
        List<String> copied = new CopyOnWriteArrayList<>();
        CountDownLatch active = new CountDownLatch(1);
        CountDownLatch all = new CountDownLatch(1);
        Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childOption(ChannelOption.ALLOCATOR, tracking)
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelActive(ChannelHandlerContext ctx) {
                        active.countDown();
                    }

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf buf = (ByteBuf) msg;
                        MemorySegment bytes = MemorySegment.ofBuffer(buf.nioBuffer());
                        if (messageBuffers.stream().noneMatch(m -> m.address() <= bytes.address()
                                && bytes.address() + bytes.byteSize() <= m.address() + m.byteSize())) {
                            copied.add(buf.readableBytes() + " bytes at " + Long.toHexString(bytes.address()));
                        }
                        byte[] b = new byte[buf.readableBytes()];
                        buf.readBytes(b).release();
                        received.writeBytes(b);
                        if (received.size() == data.length) {
                            all.countDown();
                        }
                    }
                }).bind(LOOPBACK).sync().channel();
        try {
            Channel ch = new Bootstrap().group(clientGroup).channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress()).sync().channel();
            assertThat(active.await(10, TimeUnit.SECONDS)).isTrue(); // the server's channel lent its memory
            ch.writeAndFlush(Unpooled.wrappedBuffer(data)).sync();
            assertThat(all.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(received.toByteArray()).isEqualTo(data);
            assertThat(messageBuffers).as("one buffer of the message's size, its header included").hasSize(1);
            assertThat(messageBuffers.getFirst().byteSize()).isEqualTo(data.length + 16);
            assertThat(copied).as("bytes the pipeline got outside the lent buffer").isEmpty();
            ch.close().sync();
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aServerChannelOffLoopbackNeedsAuthenticationAsRdma4jsListenersDo() {
        ChannelFuture bound = new ServerBootstrap().group(serverGroup).channel(RdmaServerSocketChannel.class)
                .childHandler(new ChannelInboundHandlerAdapter()).bind(new InetSocketAddress("0.0.0.0", 0)).awaitUninterruptibly();
        assertThat(bound.cause()).isInstanceOf(ProtectedModeException.class)
                .hasMessageContaining("rdma4j will not listen on").hasMessageContaining("shared-secret");
        assertThat(bound.channel().closeFuture().awaitUninterruptibly(5, TimeUnit.SECONDS)).as("closed on failure").isTrue();
    }

    @Test
    void peersWithoutTheServersSharedSecretAreRefused() throws Exception {
        String secret = "a-secret-of-16-bytes-or-more";
        try (RdmaTransport secured = RdmaTransport.open(TransportConfig.builder().provider("tcp").sharedSecret(secret).build());
             RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").sharedSecret(secret).build())) {
            EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(secured));
            EventLoopGroup peerGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(peer));
            try {
                Channel server = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class)
                        .childHandler(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.writeAndFlush(msg);
                            }
                        }).bind(new InetSocketAddress("0.0.0.0", 0)).sync().channel();
                int port = ((InetSocketAddress) server.localAddress()).getPort();
                InetSocketAddress address = new InetSocketAddress("127.0.0.1", port);

                ChannelFuture refused = new Bootstrap().group(clientGroup).channel(RdmaSocketChannel.class)
                        .handler(new ChannelInboundHandlerAdapter()).connect(address).awaitUninterruptibly();
                assertThat(refused.isSuccess()).as("a peer without the secret").isFalse();
                assertThat(refused.cause()).hasMessageContaining("secret");

                BlockingQueue<Object> echoed = new LinkedBlockingQueue<>();
                Channel ch = new Bootstrap().group(peerGroup).channel(RdmaSocketChannel.class)
                        .handler(recorder(echoed)).connect(address).sync().channel();
                ch.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {4, 2})).sync();
                assertThat(echoed.poll(10, TimeUnit.SECONDS)).isEqualTo("data:0402");
                ch.close().sync();
                server.close().sync();
            } finally {
                peerGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
                group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            }
        }
    }

    @Test
    void optionsThatApplyAreKeptAndSocketOnlyOnesAreAcceptedWithoutEffect() throws Exception {
        RdmaSocketChannel ch = new RdmaSocketChannel();
        RdmaSocketChannelConfig config = ch.config();
        assertThat(config.setOption(ChannelOption.SO_SNDBUF, 1 << 20)).isTrue();
        assertThat(config.getOption(ChannelOption.SO_SNDBUF)).isEqualTo(1 << 20);
        assertThat(config.setOption(ChannelOption.SO_LINGER, 0)).isTrue();
        assertThat(config.getSoLinger()).isZero();
        assertThat(config.setOption(ChannelOption.ALLOW_HALF_CLOSURE, true)).isTrue();
        assertThat(config.isAllowHalfClosure()).isTrue();
        assertThat(config.setOption(ChannelOption.TCP_NODELAY, false)).isTrue();
        assertThat(config.isTcpNoDelay()).as("rdma4j sends every message at once").isTrue();
        assertThatThrownBy(() -> config.setSendBufferSize(-1)).isInstanceOf(IllegalArgumentException.class);
        assertThat(config.getOptions()).containsKeys(ChannelOption.SO_SNDBUF, ChannelOption.SO_LINGER,
                ChannelOption.ALLOW_HALF_CLOSURE, ChannelOption.AUTO_READ);

        RdmaServerSocketChannelConfig server = new RdmaServerSocketChannel().config();
        assertThat(server.setOption(ChannelOption.SO_BACKLOG, 7)).isTrue();
        assertThat(server.getBacklog()).isEqualTo(7);
        assertThatThrownBy(() -> server.setBacklog(0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void theLeakDetectorSeesALeakedBuffer() throws InterruptedException {
        NettyLeaks.collect(); // what earlier classes left is theirs to report
        leak();
        assertThat(NettyLeaks.collect()).as("leaks reported for a buffer never released").isNotEmpty();
    }

    private static void leak() {
        io.netty.buffer.PooledByteBufAllocator.DEFAULT.directBuffer(64).writeLong(1); // never released
    }

    @Test
    void otherEventLoopsAreRefused() throws Exception {
        EventLoopGroup nio = new MultiThreadIoEventLoopGroup(1, io.netty.channel.nio.NioIoHandler.newFactory());
        try {
            ChannelFuture registered = nio.register(new RdmaSocketChannel()).awaitUninterruptibly();
            assertThat(registered.cause()).hasMessageContaining("incompatible event loop type");
        } finally {
            nio.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * A server's child handler that keeps every byte its channel reads, asks for the next read after each batch (for
     * channels without auto-read) and says when {@code expected} bytes have come.
     */
    private static final class Sink extends ChannelInboundHandlerAdapter {
        private final int expected;
        private final ByteArrayOutputStream received = new ByteArrayOutputStream();
        private final CountDownLatch active = new CountDownLatch(1);
        private final CountDownLatch all = new CountDownLatch(1);
        private volatile Channel child;

        Sink(int expected) {
            this.expected = expected;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            child = ctx.channel();
            active.countDown();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            synchronized (received) {
                byte[] bytes = new byte[buf.readableBytes()];
                buf.readBytes(bytes);
                received.writeBytes(bytes);
                if (received.size() == expected) {
                    all.countDown();
                }
            }
            buf.release();
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.read();
        }

        boolean active(int seconds) throws InterruptedException {
            return active.await(seconds, TimeUnit.SECONDS);
        }

        boolean all(int seconds) throws InterruptedException {
            return all.await(seconds, TimeUnit.SECONDS);
        }

        Channel child() {
            return child;
        }

        byte[] received() {
            synchronized (received) {
                return received.toByteArray();
            }
        }
    }

    private static ChannelInboundHandlerAdapter recorder(BlockingQueue<Object> into) {
        return new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ByteBuf buf = (ByteBuf) msg;
                into.add("data:" + io.netty.buffer.ByteBufUtil.hexDump(buf));
                buf.release();
            }

            @Override
            public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
                into.add(evt);
                ctx.fireUserEventTriggered(evt);
            }
        };
    }
}
