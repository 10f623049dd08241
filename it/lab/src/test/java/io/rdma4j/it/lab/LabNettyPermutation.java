package io.rdma4j.it.lab;

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
import io.rdma4j.netty.RdmaIoHandler;
import io.rdma4j.netty.RdmaServerSocketChannel;
import io.rdma4j.netty.RdmaSocketChannel;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.List;

/**
 * The Netty transport's bootstrap permutation on the lab's device: servers and clients of rdma4j's channels on one
 * group over one verbs transport, listening on the device's address (rdma_cm binds to it, not to loopback).
 */
final class LabNettyPermutation extends SocketTestPermutation {

    static final LabNettyPermutation INSTANCE = new LabNettyPermutation();
    static final LabDevice DEVICE = LabDevice.current();
    /** Every test of the JVM shares one transport and group: opening a verbs transport is what costs. */
    static final RdmaTransport TRANSPORT = RdmaTransport.open(VerbsLab.config(DEVICE));
    /**
     * As many loops as Netty's own permutations have: a test's server, client and accepted channels then land on three
     * different loops, which the suite needs (a half-close test's handler blocks its loop until the peer has closed).
     */
    static final EventLoopGroup GROUP = new MultiThreadIoEventLoopGroup(
            NUM_THREADS, new DefaultThreadFactory("lab-netty-rdma", true), RdmaIoHandler.newFactory(TRANSPORT));

    private LabNettyPermutation() {
    }

    /** Where the tests' servers listen: the device's address, any port. */
    static SocketAddress serverAddress() {
        return new InetSocketAddress(DEVICE.address(), 0);
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        return combo(serverSocket(), clientSocket());
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
    public List<BootstrapComboFactory<Bootstrap, Bootstrap>> datagram(SocketProtocolFamily family) {
        throw new UnsupportedOperationException("rdma4j channels are connection-oriented streams");
    }
}
