package io.rdma4j.samples.netty;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.netty.RdmaIoHandler;
import io.rdma4j.netty.reactor.RdmaLoopResources;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServer;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Clients on rdma4j's channels calling servers that do not run rdma4j (gRPC and Reactor Netty on Netty's default NIO
 * transport): they reach them over plain TCP, as a service moved to rdma4j calls the ones not moved yet.
 */
class FallbackToPlainServersTest {

    private static RdmaTransport transport;
    private static EventLoopGroup group;

    @BeforeAll
    static void start() {
        // an HTTP server may wait silently for more than rdma4j's hello: the first connection then waits this long
        transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").connectTimeout(Duration.ofSeconds(2)).build());
        group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(transport));
    }

    @AfterAll
    static void stop() throws Exception {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        transport.close();
    }

    @Test
    void aGrpcClientCallsAPlainGrpcServer() throws Exception {
        Server plain = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                .maxInboundMessageSize(16 << 20).addService(EchoService.definition()).build().start();
        ManagedChannel channel = NettyDemo.grpcChannel(group, plain.getPort());
        try {
            assertThat(ClientCalls.blockingUnaryCall(channel, EchoService.ECHO, CallOptions.DEFAULT, new byte[] {1, 2, 3}))
                    .containsExactly(1, 2, 3);
            byte[] large = new byte[4 << 20];
            new Random(9).nextBytes(large);
            assertThat(ClientCalls.blockingUnaryCall(channel, EchoService.ECHO, CallOptions.DEFAULT, large)).isEqualTo(large);
        } finally {
            // orderly, so no reply is cut off mid-write: a gRPC server dropping a write it was making leaks its buffer
            channel.shutdown().awaitTermination(5, TimeUnit.SECONDS);
            plain.shutdown().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    @Test
    void aReactorNettyClientCallsAPlainHttpServer() {
        DisposableServer plain = HttpServer.create().host("127.0.0.1").port(0)
                .route(routes -> routes.get("/hello", (request, response) -> response.sendString(Mono.just("hello"))))
                .bindNow();
        try {
            String body = NettyDemo.httpClient(RdmaLoopResources.of(group), plain.port()).get().uri("/hello")
                    .responseContent().aggregate().asString().block();
            assertThat(body).isEqualTo("hello");
        } finally {
            plain.disposeNow();
        }
    }
}
