package io.rdma4j.it.lab;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketHalfClosedTest;

import java.net.SocketAddress;
import java.util.List;

/** Netty's SocketHalfClosedTest on rdma4j's channels over the lab's verbs device: half-close in every auto-read and half-closure combination. */
class NettyHalfClosedGuestTest extends SocketHalfClosedTest {

    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return LabNettyPermutation.INSTANCE.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return LabNettyPermutation.serverAddress();
    }
}
