package io.rdma4j.it.lab;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketRstTest;

import java.net.SocketAddress;
import java.util.List;

/** Netty's SocketRstTest on rdma4j's channels over the lab's verbs device: SO_LINGER=0 resets the peer, a normal close does not. */
class NettyRstGuestTest extends SocketRstTest {

    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return LabNettyPermutation.INSTANCE.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return LabNettyPermutation.serverAddress();
    }
}
