package io.rdma4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketProtocolFamily;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketTestPermutation;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.netty.RdmaIoHandler;
import io.rdma4j.netty.RdmaServerSocketChannel;
import io.rdma4j.netty.RdmaSocketChannel;

import java.util.List;

/**
 * This transport's bootstrap permutations for Netty's test suite, as {@code EpollSocketTestPermutation} is epoll's.
 * An rdma4j channel talks only to another: servers and clients are both this transport's (no NIO mix). The provider
 * is tcp unless {@code -Drdma4j.netty.test.provider} names another (the lab runs the suite on verbs).
 */
public final class RdmaSocketTestPermutation extends SocketTestPermutation {

    static final RdmaSocketTestPermutation INSTANCE = new RdmaSocketTestPermutation();

    /** Every test of the run shares one transport and group: opening them is what costs. */
    static final RdmaTransport TRANSPORT = RdmaTransport.open(TransportConfig.builder()
            .provider(System.getProperty("rdma4j.netty.test.provider", "tcp")).build());
    static final EventLoopGroup GROUP = new MultiThreadIoEventLoopGroup(
            NUM_THREADS, new DefaultThreadFactory("testsuite-rdma", true), RdmaIoHandler.newFactory(TRANSPORT));

    private RdmaSocketTestPermutation() {
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        return combo(serverSocket(), clientSocket());
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socketWithFastOpen() {
        return socket();
    }

    @Override
    public List<BootstrapFactory<ServerBootstrap>> serverSocket() {
        return List.of(() -> new ServerBootstrap().group(GROUP).channel(RdmaServerSocketChannel.class));
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocket() {
        return List.of(() -> new Bootstrap().group(GROUP).channel(RdmaSocketChannel.class));
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocketWithFastOpen() {
        return clientSocket();
    }

    @Override
    public List<BootstrapComboFactory<Bootstrap, Bootstrap>> datagram(SocketProtocolFamily family) {
        throw new UnsupportedOperationException("rdma4j channels are connection-oriented streams");
    }
}
