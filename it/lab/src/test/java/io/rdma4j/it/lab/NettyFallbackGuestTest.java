package io.rdma4j.it.lab;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.rdma4j.netty.RdmaChannelOption;
import io.rdma4j.netty.RdmaSocketChannel;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * On the verbs provider, a client channel whose peer does not run rdma4j (Netty's NIO server on the device's
 * address, with no rdma_cm listener: rxe0 rejects the connect, siw0's MPA exchange meets a TCP server that does not
 * speak it) falls back to plain TCP and moves its bytes both ways.
 */
class NettyFallbackGuestTest {

    @Test
    void aPeerWithoutRdma4jIsReachedOverPlainTcp() throws Exception {
        EventLoopGroup nio = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        try {
            Channel server = new ServerBootstrap().group(nio).channel(NioServerSocketChannel.class)
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ctx.writeAndFlush(msg);
                                }
                            });
                        }
                    }).bind(new InetSocketAddress(LabNettyPermutation.DEVICE.address(), 0)).sync().channel();
            ByteArrayOutputStream received = new ByteArrayOutputStream();
            byte[] data = new byte[1 << 20];
            new Random(46).nextBytes(data);
            Channel ch = new Bootstrap().group(LabNettyPermutation.GROUP).channel(RdmaSocketChannel.class)
                    .option(RdmaChannelOption.TCP_FALLBACK, true)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ByteBuf buf = (ByteBuf) msg;
                            synchronized (received) {
                                byte[] b = new byte[buf.readableBytes()];
                                buf.readBytes(b);
                                received.writeBytes(b);
                                received.notifyAll();
                            }
                            buf.release();
                        }
                    }).connect(server.localAddress()).sync().channel();
            ch.writeAndFlush(Unpooled.wrappedBuffer(data)).sync();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            synchronized (received) {
                while (received.size() < data.length && System.nanoTime() < deadline) {
                    received.wait(1000);
                }
                assertThat(received.toByteArray()).isEqualTo(data);
            }
            ch.close().sync();
            server.close().sync();
        } finally {
            nio.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}
