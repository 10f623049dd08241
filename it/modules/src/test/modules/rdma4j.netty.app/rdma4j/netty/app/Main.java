package rdma4j.netty.app;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.netty.RdmaIoHandler;
import io.rdma4j.netty.RdmaServerSocketChannel;
import io.rdma4j.netty.RdmaSocketChannel;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** An echo server and a client on rdma4j's Netty channels, over tcp on loopback. */
public final class Main {

    private Main() {
    }

    public static void main(String[] args) throws Exception {
        try (RdmaTransport transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build())) {
            EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(transport));
            try {
                Channel server = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class)
                        .childHandler(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.writeAndFlush(msg);
                            }
                        }).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
                CompletableFuture<String> echoed = new CompletableFuture<>();
                Channel client = new Bootstrap().group(group).channel(RdmaSocketChannel.class)
                        .handler(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf b = (ByteBuf) msg;
                                echoed.complete(b.toString(StandardCharsets.US_ASCII));
                                b.release();
                            }
                        }).connect(server.localAddress()).sync().channel();
                client.writeAndFlush(Unpooled.copiedBuffer("hello", StandardCharsets.US_ASCII));
                System.out.println("ECHO " + echoed.get(10, TimeUnit.SECONDS) + " over " + client.getClass().getName()
                        + " in " + client.getClass().getModule().getName() + ", Netty in "
                        + Channel.class.getModule().getName());
                client.close().sync();
                server.close().sync();
            } finally {
                group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
            }
        }
    }
}
