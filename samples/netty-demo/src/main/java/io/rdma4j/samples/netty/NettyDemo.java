package io.rdma4j.samples.netty;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.resolver.DefaultAddressResolverGroup;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.netty.RdmaIoHandler;
import io.rdma4j.netty.RdmaServerSocketChannel;
import io.rdma4j.netty.RdmaSocketChannel;
import io.rdma4j.netty.reactor.RdmaLoopResources;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/**
 * gRPC-java and Reactor Netty over rdma4j: each framework gets RDMA by naming rdma4j's channel types and event
 * loops, nothing else changes. Servers and clients share one transport here; across hosts each process opens its own.
 */
public final class NettyDemo {

    public static void main(String[] args) throws Exception {
        TransportConfig config = TransportConfig.fromProperties(System.getProperties(), "rdma4j.");
        try (RdmaTransport transport = RdmaTransport.open(config)) {
            System.out.println("[netty-demo] provider: " + transport.selection());
            EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory(transport));
            try {
                System.out.println("[netty-demo] gRPC unary over rdma4j: " + grpc(group));
                System.out.println("[netty-demo] HTTP over rdma4j: " + http(group));
            } finally {
                group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            }
        }
    }

    /** A gRPC server and client on the group; one unary call. */
    static String grpc(EventLoopGroup group) throws Exception {
        Server server = grpcServer(group).build().start();
        ManagedChannel channel = grpcChannel(group, server.getPort());
        try {
            byte[] reply = ClientCalls.blockingUnaryCall(channel, EchoService.ECHO, CallOptions.DEFAULT,
                    "hello".getBytes(StandardCharsets.UTF_8));
            return new String(reply, StandardCharsets.UTF_8);
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    public static NettyServerBuilder grpcServer(EventLoopGroup group) {
        NettyServerBuilder server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                .channelType(RdmaServerSocketChannel.class)   // rdma4j's channels and event loops, nothing else changes
                .bossEventLoopGroup(group)
                .workerEventLoopGroup(group);
        return server.maxInboundMessageSize(16 << 20).addService(EchoService.definition());
    }

    public static ManagedChannel grpcChannel(EventLoopGroup group, int port) {
        NettyChannelBuilder client = NettyChannelBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
                .channelType(RdmaSocketChannel.class)
                .eventLoopGroup(group);
        return client.maxInboundMessageSize(16 << 20).usePlaintext().build();
    }

    /** A Reactor Netty HTTP server and client on the group; one GET. */
    static String http(EventLoopGroup group) {
        RdmaLoopResources loops = RdmaLoopResources.of(group);   // Reactor Netty's loops: the group's
        DisposableServer server = httpServer(loops).bindNow();
        try {
            return httpClient(loops, server.port()).get().uri("/hello").responseContent().aggregate().asString().block();
        } finally {
            server.disposeNow();
        }
    }

    public static HttpServer httpServer(RdmaLoopResources loops) {
        HttpServer http = HttpServer.create().host("127.0.0.1").port(0).runOn(loops);
        return http.route(routes -> routes
                        .get("/hello", (request, response) -> response.sendString(Mono.just("hello")))
                        .post("/echo", (request, response) -> response.send(request.receive().retain())));
    }

    public static HttpClient httpClient(RdmaLoopResources loops, int port) {
        HttpClient httpClient = HttpClient.create().runOn(loops).resolver(DefaultAddressResolverGroup.INSTANCE);  // JDK resolver: no DNS channel
        return httpClient.baseUrl("http://127.0.0.1:" + port);
    }
}
