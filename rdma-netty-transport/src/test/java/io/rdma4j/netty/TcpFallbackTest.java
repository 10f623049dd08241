package io.rdma4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.channel.socket.ChannelOutputShutdownEvent;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A client channel whose peer does not run rdma4j (Netty's NIO server here) reaches it over plain TCP
 * ({@link RdmaChannelOption#TCP_FALLBACK}): reads, large writes, auto-read, half-close and reset as on a socket, and
 * the cases that never fall back. Netty's own suite cannot run this way: each of its tests counts the server's
 * connections and bytes, and the fallback's first attempt is a connection the server sees too.
 */
class TcpFallbackTest {

    private static final InetSocketAddress LOOPBACK = new InetSocketAddress("127.0.0.1", 0);
    private static final String GREETING = "HELLO FROM A PLAIN SERVER\n";

    private static RdmaTransport transport;
    private static EventLoopGroup rdmaGroup;
    private static EventLoopGroup nioGroup;

    @BeforeAll
    static void open() {
        transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        rdmaGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(transport));
        nioGroup = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    }

    @AfterAll
    static void close() throws InterruptedException {
        rdmaGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        nioGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        transport.close();
    }

    @Test
    void aPeerWithoutRdma4jIsReachedOverPlainTcpWithLargeWritesBothWays() throws Exception {
        PlainServer server = PlainServer.greetingAndEchoing();
        try {
            Received received = new Received();
            Channel ch = client(received).connect(server.address()).sync().channel();
            assertThat(ch.config().getOption(RdmaChannelOption.TCP_FALLBACK)).as("the transport's default").isNull();
            assertThat(ch.remoteAddress()).isEqualTo(server.address());
            assertThat(ch.localAddress()).isNotNull();
            received.await(GREETING.length());
            byte[] data = new byte[4 << 20];
            new Random(45).nextBytes(data);
            ch.writeAndFlush(Unpooled.wrappedBuffer(data)).sync();
            byte[] all = received.await(GREETING.length() + data.length);
            assertThat(new String(all, 0, GREETING.length(), StandardCharsets.US_ASCII)).isEqualTo(GREETING);
            assertThat(java.util.Arrays.copyOfRange(all, GREETING.length(), all.length)).isEqualTo(data);
            ch.close().sync();
            assertThat(server.children()).as("the first attempt, then the plain connection").hasSize(2);

            // the peer is remembered: the next connection to it goes straight to plain TCP
            client(new Received()).connect(server.address()).sync().channel().close().sync();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (server.children().size() < 3 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            Thread.sleep(200);
            assertThat(server.children()).as("one connection more, no first attempt this time").hasSize(3);
        } finally {
            server.close();
        }
    }

    @Test
    void halfCloseAndResetWorkAsOnASocket() throws Exception {
        PlainServer server = PlainServer.greetingAndEchoing();
        try {
            Received received = new Received();
            SocketChannel ch = (SocketChannel) client(received).option(ChannelOption.ALLOW_HALF_CLOSURE, true)
                    .connect(server.address()).sync().channel();
            received.await(GREETING.length());
            ch.shutdownOutput().sync();
            // the server answers our end with BYE and closes: our input ends after it
            assertThat(List.of(received.events.poll(10, TimeUnit.SECONDS), received.events.poll(10, TimeUnit.SECONDS),
                    received.events.poll(10, TimeUnit.SECONDS))).containsExactly(ChannelOutputShutdownEvent.INSTANCE,
                    ChannelInputShutdownEvent.INSTANCE, ChannelInputShutdownReadComplete.INSTANCE);
            assertThat(new String(received.await(GREETING.length() + 4), StandardCharsets.US_ASCII)).endsWith("BYE\n");
            assertThat(ch.isInputShutdown()).isTrue();
            ch.close().sync();

            Channel reset = client(new Received()).option(ChannelOption.SO_LINGER, 0).connect(server.address()).sync().channel();
            reset.close().sync();
            assertThat(server.failures.poll(10, TimeUnit.SECONDS)).as("the server's read of a reset, or its greeting's write")
                    .isInstanceOf(IOException.class);
        } finally {
            server.close();
        }
    }

    @Test
    void withAutoReadOffTheChannelReadsOnlyWhenAsked() throws Exception {
        PlainServer server = PlainServer.greetingAndEchoing();
        try {
            Received received = new Received();
            Channel ch = client(received).option(ChannelOption.AUTO_READ, false).connect(server.address()).sync().channel();
            Thread.sleep(200);
            assertThat(received.size()).as("nothing read before a read() was asked for").isZero();
            ch.read();
            received.await(GREETING.length());
            ch.close().sync();
        } finally {
            server.close();
        }
    }

    @Test
    void anEchoServiceIsTakenForWhatItIsNotForAnRdma4jPeer() throws Exception {
        PlainServer server = PlainServer.echoing();
        try {
            Received received = new Received();
            Channel ch = client(received).connect(server.address()).sync().channel();
            ch.writeAndFlush(Unpooled.copiedBuffer("abc", StandardCharsets.US_ASCII)).sync();
            assertThat(new String(received.await(3), StandardCharsets.US_ASCII)).isEqualTo("abc");
            ch.close().sync();
        } finally {
            server.close();
        }
    }

    /**
     * A peer remembered without rdma4j whose plain connect is refused may run rdma4j now (over verbs, an rdma4j
     * listener has no TCP port a plain connect could reach): the same connect tries rdma4j, and the peer is forgotten,
     * so that an rdma4j server that took the address up is reached over rdma4j.
     */
    @Test
    void aRememberedPeerThatRefusesPlainTcpIsTriedWithRdma4jAndForgotten() throws Exception {
        PlainServer plain = PlainServer.echoing();
        InetSocketAddress address = plain.address();
        try {
            client(new Received()).connect(address).sync().channel().close().sync(); // remembered from now on
        } finally {
            plain.close();
        }
        // Bound but not listening: a connect is refused, and cannot pick this ephemeral port as its own source port
        // (a loopback connect to a free port in the ephemeral range may connect to itself).
        try (Socket holder = new Socket()) {
            holder.setReuseAddress(true);
            bindOnceReleased(holder, address);
            ChannelFuture refused = client(new Received()).connect(address).await();
            assertThat(refused.isSuccess()).isFalse();
            assertThat(refused.cause()).as("rdma4j's connect, tried after plain TCP was refused")
                    .hasMessageContaining("rdma4j");
        }

        BlockingQueue<Channel> children = new LinkedBlockingQueue<>();
        Channel server = echoingRdma4jServer(address, children);
        try {
            Received received = new Received();
            Channel ch = client(received).connect(address).sync().channel();
            assertThat(children.poll(10, TimeUnit.SECONDS)).as("an rdma4j connection at the server").isNotNull();
            ch.writeAndFlush(Unpooled.copiedBuffer("over rdma4j", StandardCharsets.US_ASCII)).sync();
            assertThat(new String(received.await(11), StandardCharsets.US_ASCII)).isEqualTo("over rdma4j");
            ch.close().sync();
        } finally {
            server.close().sync();
        }
    }

    /**
     * Refused both over rdma4j and over plain TCP, a peer is not remembered without rdma4j: it may be an rdma4j server
     * restarting, and the tcp provider's listener would accept a plain connect once it is back.
     */
    @Test
    void aPeerThatRefusesBothConnectsIsNotRememberedAndIsReachedOverRdma4jOnceItListens() throws Exception {
        try (Socket holder = new Socket()) { // bound, not listening: refuses every connect
            holder.bind(LOOPBACK);
            InetSocketAddress address = (InetSocketAddress) holder.getLocalSocketAddress();
            ChannelFuture refused = client(new Received()).connect(address).await();
            assertThat(refused.isSuccess()).isFalse();
            assertThat(TcpFallback.remembered(address)).as("remembered without rdma4j").isNull();
            holder.close();

            BlockingQueue<Channel> children = new LinkedBlockingQueue<>();
            Channel server = echoingRdma4jServer(address, children);
            try {
                Channel ch = client(new Received()).connect(address).sync().channel();
                assertThat(children.poll(10, TimeUnit.SECONDS)).as("an rdma4j connection at the server").isNotNull();
                ch.close().sync();
            } finally {
                server.close().sync();
            }
        }
    }

    @Test
    void withoutFallbackTheConnectFailsSayingThePeerDoesNotRunRdma4j() throws Exception {
        PlainServer server = PlainServer.greetingAndEchoing();
        try {
            ChannelFuture connect = client(new Received()).option(RdmaChannelOption.TCP_FALLBACK, false)
                    .connect(server.address()).await();
            assertThat(connect.isSuccess()).isFalse();
            assertThat(connect.cause()).hasMessageContaining("not an rdma4j tcp endpoint");
        } finally {
            server.close();
        }
    }

    @Test
    void aTransportThatAuthenticatesPeersFallsBackOnlyWhenTold() throws Exception {
        PlainServer server = PlainServer.greetingAndEchoing();
        RdmaTransport secured = RdmaTransport.open(TransportConfig.builder().provider("tcp")
                .sharedSecret("a secret plain TCP would not carry").build());
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(secured));
        try {
            ChannelFuture refused = new Bootstrap().group(group).channel(RdmaSocketChannel.class)
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.address()).await();
            assertThat(refused.isSuccess()).isFalse();
            Received received = new Received();
            Channel ch = new Bootstrap().group(group).channel(RdmaSocketChannel.class).handler(received)
                    .option(RdmaChannelOption.TCP_FALLBACK, true).connect(server.address()).sync().channel();
            received.await(GREETING.length());
            ch.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            secured.close();
            server.close();
        }
    }

    /**
     * Binds to the port a closed NIO server listened on. NIO closes a listening socket registered with a selector only
     * when the selector next deregisters it, after the close future completed, so the port may be held a moment
     * longer.
     */
    private static void bindOnceReleased(Socket socket, InetSocketAddress address) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                socket.bind(address);
                return;
            } catch (BindException stillListening) {
                if (System.nanoTime() > deadline) {
                    throw stillListening;
                }
                Thread.sleep(20);
            }
        }
    }

    /** An rdma4j server on {@code address} that echoes what it reads; its connections go to {@code children}. */
    private static Channel echoingRdma4jServer(InetSocketAddress address, BlockingQueue<Channel> children)
            throws InterruptedException {
        return new ServerBootstrap().group(rdmaGroup).channel(RdmaServerSocketChannel.class)
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelActive(ChannelHandlerContext ctx) {
                        children.add(ctx.channel());
                    }

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ctx.writeAndFlush(msg);
                    }
                }).bind(address).sync().channel();
    }

    private static Bootstrap client(Received handler) {
        return new Bootstrap().group(rdmaGroup).channel(RdmaSocketChannel.class).handler(handler);
    }

    /** What a client channel read, and the user events it saw. */
    private static final class Received extends ChannelInboundHandlerAdapter {
        private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        final BlockingQueue<Object> events = new LinkedBlockingQueue<>();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            synchronized (bytes) {
                byte[] b = new byte[buf.readableBytes()];
                buf.readBytes(b);
                bytes.writeBytes(b);
                bytes.notifyAll();
            }
            buf.release();
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            events.add(evt);
        }

        int size() {
            synchronized (bytes) {
                return bytes.size();
            }
        }

        /** All bytes read, once there are at least {@code n}. */
        byte[] await(int n) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            synchronized (bytes) {
                while (bytes.size() < n) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        throw new AssertionError("read " + bytes.size() + " of " + n + " bytes within 20 s");
                    }
                    TimeUnit.NANOSECONDS.timedWait(bytes, left);
                }
                return bytes.toByteArray();
            }
        }
    }

    /**
     * A Netty NIO server that does not run rdma4j: it greets each connection (or not) and echoes what it reads; once
     * a peer ends its output it answers {@code BYE} and closes. Its connections' read failures are kept.
     */
    private record PlainServer(Channel channel, BlockingQueue<Throwable> failures, List<Channel> children) {

        static PlainServer greetingAndEchoing() throws InterruptedException {
            return start(true);
        }

        static PlainServer echoing() throws InterruptedException {
            return start(false);
        }

        private static PlainServer start(boolean greets) throws InterruptedException {
            BlockingQueue<Throwable> failures = new LinkedBlockingQueue<>();
            List<Channel> children = new CopyOnWriteArrayList<>();
            Channel channel = new ServerBootstrap().group(nioGroup).channel(NioServerSocketChannel.class)
                    .childOption(ChannelOption.ALLOW_HALF_CLOSURE, true)
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel child) {
                            child.pipeline().addLast(handler(greets, failures, children));
                        }
                    }).bind(LOOPBACK).sync().channel();
            return new PlainServer(channel, failures, children);
        }

        private static ChannelInboundHandlerAdapter handler(boolean greets, BlockingQueue<Throwable> failures,
                                                            List<Channel> children) {
            return new ChannelInboundHandlerAdapter() {
                @Override
                public void channelActive(ChannelHandlerContext ctx) {
                    children.add(ctx.channel());
                    if (greets) {
                        // A peer that resets at once may do so before the greeting goes out: the write fails then
                        // (reported to its future, not to exceptionCaught), and the connection closes unread.
                        ctx.writeAndFlush(Unpooled.copiedBuffer(GREETING, StandardCharsets.US_ASCII)).addListener(f -> {
                            if (!f.isSuccess()) {
                                failures.add(f.cause());
                            }
                        });
                    }
                }

                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    ctx.write(msg);
                }

                @Override
                public void channelReadComplete(ChannelHandlerContext ctx) {
                    ctx.flush();
                }

                @Override
                public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
                    if (evt == ChannelInputShutdownEvent.INSTANCE) {
                        ctx.writeAndFlush(Unpooled.copiedBuffer("BYE\n", StandardCharsets.US_ASCII))
                                .addListener(f -> ctx.close());
                    }
                }

                @Override
                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                    failures.add(cause);
                    ctx.close();
                }
            };
        }

        InetSocketAddress address() {
            return (InetSocketAddress) channel.localAddress();
        }

        void close() throws InterruptedException {
            channel.close().sync();
            for (Channel c : children) {
                c.close().sync();
            }
        }
    }
}
