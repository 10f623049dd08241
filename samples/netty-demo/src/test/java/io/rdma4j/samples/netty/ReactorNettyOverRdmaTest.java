package io.rdma4j.samples.netty;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.netty.RdmaIoHandler;
import io.rdma4j.netty.RdmaSocketChannel;
import io.rdma4j.netty.reactor.RdmaLoopResources;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.ByteBufFlux;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;

import java.time.Duration;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Reactor Netty's real HttpServer and HttpClient on rdma4j's loops, each with its own transport. */
class ReactorNettyOverRdmaTest {

    private static RdmaTransport serverTransport;
    private static RdmaTransport clientTransport;
    private static EventLoopGroup serverGroup;
    private static RdmaLoopResources clientLoops;
    private static DisposableServer server;
    private static final Set<Class<?>> serverChannels = ConcurrentHashMap.newKeySet();
    private static final Set<Class<?>> clientChannels = ConcurrentHashMap.newKeySet();

    @BeforeAll
    static void start() {
        serverTransport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        clientTransport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        serverGroup = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory(serverTransport));
        clientLoops = RdmaLoopResources.create(clientTransport, 1);
        server = NettyDemo.httpServer(RdmaLoopResources.of(serverGroup))
                .doOnConnection(c -> serverChannels.add(c.channel().getClass())).bindNow();
    }

    @AfterAll
    static void stop() throws Exception {
        server.disposeNow();
        clientLoops.disposeLater().block(Duration.ofSeconds(10));
        serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        clientTransport.close();
        serverTransport.close();
    }

    private static HttpClient client() {
        return NettyDemo.httpClient(clientLoops, server.port())
                .doOnConnected(c -> clientChannels.add(c.channel().getClass()));
    }

    @Test
    void getAndPostOverRdma4jChannels() {
        assertThat(client().get().uri("/hello").responseContent().aggregate().asString().block(Duration.ofSeconds(30)))
                .isEqualTo("hello");
        byte[] body = new byte[1 << 20];
        new Random(1).nextBytes(body);
        byte[] echoed = client().post().uri("/echo").send(ByteBufFlux.fromInbound(Mono.just(body)))
                .responseContent().aggregate().asByteArray().block(Duration.ofSeconds(30));
        assertThat(echoed).isEqualTo(body);
        assertThat(serverChannels).containsOnly(RdmaSocketChannel.class);
        assertThat(clientChannels).containsOnly(RdmaSocketChannel.class);
    }

    @Test
    void aClientThatWouldResolveByDnsIsToldWhy() {
        RdmaLoopResources loops = RdmaLoopResources.create(clientTransport, 1);
        try {
            assertThatThrownBy(() -> loops.onChannel(io.netty.channel.socket.DatagramChannel.class, loops.onClient(true)))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("DefaultAddressResolverGroup");
            Channel ch = loops.onChannel(io.netty.channel.socket.SocketChannel.class, loops.onClient(true));
            assertThat(ch).isInstanceOf(RdmaSocketChannel.class);
        } finally {
            loops.disposeLater().block(Duration.ofSeconds(10));
        }
    }
}
