package io.rdma4j.it.bench.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.netty.RdmaIoHandler;
import io.rdma4j.netty.RdmaServerSocketChannel;
import io.rdma4j.netty.RdmaSocketChannel;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One transport under test: an echo server and a sink server, each on a one-thread server group, and a ping client and
 * a stream client on a one-thread client group, as two processes would have (rdma4j: a transport per side).
 */
final class Side implements AutoCloseable {

    static final int PING_BYTES = 64;
    static final int STREAM_BUFFER = 1 << 20;

    final String name;
    private final EventLoopGroup serverGroup;
    private final EventLoopGroup clientGroup;
    private final AutoCloseable resources;
    private final Channel echoServer;
    private final Channel sinkServer;
    private final Channel pingChannel;
    private final Channel streamChannel;
    private final Ping ping = new Ping();
    private final Stream stream = new Stream();
    final AtomicLong sunk = new AtomicLong();

    private Side(String name, InetAddress address, IoHandlerFactory server, IoHandlerFactory client,
                 Class<? extends ServerChannel> serverType, Class<? extends Channel> clientType, AutoCloseable resources)
            throws InterruptedException {
        this.name = name;
        this.resources = resources;
        serverGroup = new MultiThreadIoEventLoopGroup(1, server);
        clientGroup = new MultiThreadIoEventLoopGroup(1, client);
        InetSocketAddress loopback = new InetSocketAddress(address, 0);
        echoServer = new ServerBootstrap().group(serverGroup).channel(serverType)
                .childOption(ChannelOption.TCP_NODELAY, true).childHandler(new Echo()).bind(loopback).sync().channel();
        sinkServer = new ServerBootstrap().group(serverGroup).channel(serverType)
                .childHandler(new Sink(sunk)).bind(loopback).sync().channel();
        pingChannel = new Bootstrap().group(clientGroup).channel(clientType).option(ChannelOption.TCP_NODELAY, true)
                .handler(ping).connect(echoServer.localAddress()).sync().channel();
        Bootstrap streamer = new Bootstrap().group(clientGroup).channel(clientType).handler(stream);
        if (clientType == RdmaSocketChannel.class && Integer.getInteger("bench.rdma.send-window", 0) > 0) {
            streamer.option(ChannelOption.SO_SNDBUF, Integer.getInteger("bench.rdma.send-window"));
        }
        streamChannel = streamer.connect(sinkServer.localAddress()).sync().channel();
    }

    /** rdma4j's transport, a {@code config} transport per side, its servers listening on {@code address}. */
    static Side rdma4j(TransportConfig config, InetAddress address) throws InterruptedException {
        RdmaTransport serverTransport = RdmaTransport.open(config);
        RdmaTransport clientTransport = RdmaTransport.open(config);
        java.time.Duration spin = java.time.Duration.ofNanos(1000L * Integer.getInteger("bench.rdma.spin-micros", 0));
        return new Side("rdma4j (" + serverTransport.provider() + ")", address, RdmaIoHandler.newFactory(serverTransport, spin),
                RdmaIoHandler.newFactory(clientTransport, spin), RdmaServerSocketChannel.class, RdmaSocketChannel.class, () -> {
                    clientTransport.close();
                    serverTransport.close();
                });
    }

    static Side nio(InetAddress address) throws InterruptedException {
        return new Side("NIO", address, NioIoHandler.newFactory(), NioIoHandler.newFactory(), NioServerSocketChannel.class,
                NioSocketChannel.class, () -> { });
    }

    /** Null where the native epoll transport cannot load. */
    static Side epoll(InetAddress address) throws InterruptedException {
        if (!Epoll.isAvailable()) {
            System.out.println("epoll unavailable: " + Epoll.unavailabilityCause());
            return null;
        }
        return new Side("epoll", address, EpollIoHandler.newFactory(), EpollIoHandler.newFactory(), EpollServerSocketChannel.class,
                EpollSocketChannel.class, () -> { });
    }

    /** {@code count} round trips of 64 bytes, one at a time, on the client's event loop; their times in ns. */
    long[] pingPong(int count) throws Exception {
        long[] samples = new long[count];
        CompletableFuture<Void> done = new CompletableFuture<>();
        pingChannel.eventLoop().execute(() -> ping.start(pingChannel, samples, done));
        done.get(60, TimeUnit.SECONDS);
        return samples;
    }

    /** Streams 1 MiB buffers for {@code nanos}; the bytes per second the sink received meanwhile. */
    double stream(long nanos) throws Exception {
        streamChannel.eventLoop().execute(() -> stream.start(streamChannel));
        Thread.sleep(20); // the stream's start, not counted
        long bytes0 = sunk.get();
        long t0 = System.nanoTime();
        Thread.sleep(nanos / 1_000_000);
        long bytes1 = sunk.get();
        long t1 = System.nanoTime();
        streamChannel.eventLoop().submit(stream::stop).get();
        // let what was written drain before another side runs
        long last;
        do {
            last = sunk.get();
            Thread.sleep(20);
        } while (sunk.get() != last);
        return (bytes1 - bytes0) * 1e9 / (t1 - t0);
    }

    @Override
    public void close() throws Exception {
        pingChannel.close().sync();
        streamChannel.close().sync();
        echoServer.close().sync();
        sinkServer.close().sync();
        clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        stream.release();
        resources.close();
    }

    @ChannelHandler.Sharable
    private static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.writeAndFlush(msg, ctx.voidPromise());
        }
    }

    @ChannelHandler.Sharable
    private static final class Sink extends ChannelInboundHandlerAdapter {
        private final AtomicLong sunk;

        Sink(AtomicLong sunk) {
            this.sunk = sunk;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            sunk.addAndGet(buf.readableBytes());
            buf.release();
        }
    }

    /** Sends the next request as soon as the whole answer is in: the time of each exchange, loop to loop. */
    private static final class Ping extends ChannelInboundHandlerAdapter {
        private final ByteBuf request = PooledByteBufAllocator.DEFAULT.directBuffer(PING_BYTES).writeZero(PING_BYTES);
        private Channel channel;
        private long[] samples;
        private int next;
        private int pending;
        private long sentAt;
        private CompletableFuture<Void> done;

        void start(Channel channel, long[] samples, CompletableFuture<Void> done) {
            this.channel = channel;
            this.samples = samples;
            this.done = done;
            next = 0;
            send();
        }

        private void send() {
            pending = PING_BYTES;
            sentAt = System.nanoTime();
            channel.writeAndFlush(request.retainedDuplicate(), channel.voidPromise());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            pending -= buf.readableBytes();
            buf.release();
            if (pending > 0 || samples == null) {
                return;
            }
            samples[next++] = System.nanoTime() - sentAt;
            if (next < samples.length) {
                send();
            } else {
                samples = null;
                done.complete(null);
            }
        }
    }

    /** Writes 1 MiB buffers while the channel is writable: the transport's own back-pressure paces it. */
    private static final class Stream extends ChannelInboundHandlerAdapter {
        private final ByteBuf chunk = PooledByteBufAllocator.DEFAULT.directBuffer(STREAM_BUFFER).writeZero(STREAM_BUFFER);
        private Channel channel;
        private boolean running;

        void start(Channel channel) {
            this.channel = channel;
            running = true;
            pump();
        }

        void stop() {
            running = false;
        }

        private void pump() {
            while (running && channel.isWritable()) {
                channel.write(chunk.retainedDuplicate(), channel.voidPromise());
            }
            channel.flush();
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            if (running && ctx.channel().isWritable()) {
                pump();
            }
        }

        void release() {
            chunk.release();
        }
    }
}
