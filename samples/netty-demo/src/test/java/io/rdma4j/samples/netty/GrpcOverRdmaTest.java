package io.rdma4j.samples.netty;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.netty.RdmaIoHandler;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** A real gRPC server and client (grpc-netty) on rdma4j's channels, each with its own transport, as two processes would. */
class GrpcOverRdmaTest {

    private static RdmaTransport serverTransport;
    private static RdmaTransport clientTransport;
    private static EventLoopGroup serverGroup;
    private static EventLoopGroup clientGroup;
    private static Server server;
    private static ManagedChannel channel;
    private static final AtomicLong serverReceivedBytes = new AtomicLong();

    @BeforeAll
    static void start() throws Exception {
        serverTransport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        clientTransport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        serverTransport.metrics().addListener((type, bytes, nanos, success) -> {
            if (type == OperationType.RECEIVE) {
                serverReceivedBytes.addAndGet(bytes);
            }
        });
        serverGroup = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory(serverTransport));
        clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory(clientTransport));
        server = NettyDemo.grpcServer(serverGroup).build().start();
        channel = NettyDemo.grpcChannel(clientGroup, server.getPort());
    }

    @AfterAll
    static void stop() throws Exception {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        clientTransport.close();
        serverTransport.close();
    }

    @Test
    void unaryCallsGoThroughRdma4j() {
        long before = serverReceivedBytes.get();
        byte[] reply = ClientCalls.blockingUnaryCall(channel, EchoService.ECHO, CallOptions.DEFAULT, new byte[] {1, 2, 3});
        assertThat(reply).containsExactly(1, 2, 3);
        assertThat(serverReceivedBytes.get()).as("bytes the server's rdma4j transport received").isGreaterThan(before);
        assertThat(serverTransport.metrics().openConnections()).isPositive();
    }

    @Test
    void serverStreaming() {
        Iterator<byte[]> replies = ClientCalls.blockingServerStreamingCall(channel, EchoService.COUNT, CallOptions.DEFAULT,
                new byte[] {100});
        List<Integer> values = new ArrayList<>();
        replies.forEachRemaining(r -> values.add((int) r[0]));
        assertThat(values).hasSize(100).startsWith(0, 1, 2).endsWith(98, 99);
    }

    @Test
    void bidirectionalStreaming() throws Exception {
        List<String> replies = new ArrayList<>();
        CompletableFuture<Void> done = new CompletableFuture<>();
        StreamObserver<byte[]> requests = ClientCalls.asyncBidiStreamingCall(
                channel.newCall(EchoService.REVERSE, CallOptions.DEFAULT), new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
                        synchronized (replies) {
                            replies.add(new String(value));
                        }
                    }

                    @Override
                    public void onError(Throwable t) {
                        done.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                        done.complete(null);
                    }
                });
        for (int i = 0; i < 50; i++) {
            requests.onNext(("abc" + i).getBytes());
        }
        requests.onCompleted();
        done.get(30, TimeUnit.SECONDS);
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            expected.add(new StringBuilder("abc" + i).reverse().toString());
        }
        assertThat(replies).as("each message answered, reversed, in order").isEqualTo(expected);
    }

    @Test
    void aCallPastItsDeadlineFailsWithDeadlineExceeded() {
        // the server answers after 2 s
        assertThatThrownBy(() -> ClientCalls.blockingUnaryCall(channel, EchoService.SLOW,
                CallOptions.DEFAULT.withDeadlineAfter(200, TimeUnit.MILLISECONDS), new byte[] {(byte) 200}))
                .isInstanceOfSatisfying(StatusRuntimeException.class,
                        e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.DEADLINE_EXCEEDED));
        // the connection is still good for the next call
        assertThat(ClientCalls.blockingUnaryCall(channel, EchoService.ECHO, CallOptions.DEFAULT, new byte[] {5})).containsExactly(5);
    }

    @Test
    void aLargeMessageCrossesManyRdma4jMessages() {
        byte[] large = new byte[8 << 20];
        new Random(8).nextBytes(large);
        byte[] reply = ClientCalls.blockingUnaryCall(channel, EchoService.ECHO, CallOptions.DEFAULT, large);
        assertThat(reply).isEqualTo(large);
    }
}
