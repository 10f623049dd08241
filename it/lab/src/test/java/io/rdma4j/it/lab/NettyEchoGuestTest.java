package io.rdma4j.it.lab;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketEchoTest;

import java.net.SocketAddress;
import java.util.List;

/** Netty's SocketEchoTest on rdma4j's channels over the lab's verbs device: 1 MiB echoed in random writes, auto-read on and off, handlers on another executor. */
class NettyEchoGuestTest extends SocketEchoTest {

    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return LabNettyPermutation.INSTANCE.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return LabNettyPermutation.serverAddress();
    }
}
