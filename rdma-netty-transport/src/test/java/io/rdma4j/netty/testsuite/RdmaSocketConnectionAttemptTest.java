package io.rdma4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.ConnectTimeoutException;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketConnectionAttemptTest;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Connection refused, with and without half-closure, and the connect timeout and cancellation. Netty's own timeout and
 * cancellation cases connect to the TEST-NET address 198.51.100.254, off this host, and this project's tests send
 * traffic to loopback only: here they connect to a loopback socket that accepts in the kernel and never says a word,
 * so rdma4j's handshake never completes.
 */
class RdmaSocketConnectionAttemptTest extends SocketConnectionAttemptTest {

    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Override
    public void testConnectTimeout(Bootstrap cb) throws Throwable {
        try (ServerSocket silent = silentPeer()) {
            ChannelFuture timedOut = cb.handler(new ChannelInboundHandlerAdapter())
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 300).connect(address(silent)).await();
            assertThat(timedOut.cause()).isInstanceOf(ConnectTimeoutException.class);
            assertThat(timedOut.channel().closeFuture().await(5, TimeUnit.SECONDS)).isTrue();
        }
    }

    @Override
    public void testConnectCancellation(Bootstrap cb) throws Throwable {
        try (ServerSocket silent = silentPeer()) {
            ChannelFuture cancelled = cb.handler(new ChannelInboundHandlerAdapter()).connect(address(silent));
            assertThat(cancelled.await(200)).as("no answer yet").isFalse();
            assertThat(cancelled.cancel(true)).isTrue();
            assertThat(cancelled.channel().closeFuture().await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(cancelled.isCancelled()).isTrue();
        }
    }

    private static ServerSocket silentPeer() throws IOException {
        return new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    }

    private static InetSocketAddress address(ServerSocket s) {
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), s.getLocalPort());
    }
}
