package io.rdma4j.it.lab;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketGatheringWriteTest;

import java.net.SocketAddress;
import java.util.List;

/** Netty's SocketGatheringWriteTest on rdma4j's channels over the lab's verbs device: many and composite buffers per flush, large writes. */
class NettyGatheringWriteGuestTest extends SocketGatheringWriteTest {

    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return LabNettyPermutation.INSTANCE.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return LabNettyPermutation.serverAddress();
    }
}
