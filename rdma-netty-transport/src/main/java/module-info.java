/**
 * rdma4j's Netty transport: event loops and socket channels over rdma4j's messages ({@code io.rdma4j.netty}), and
 * the loop resources that put Reactor Netty on them ({@code .reactor}). Netty's jars are named modules; Reactor's
 * have Automatic-Module-Names, and only applications that use Reactor Netty need them.
 */
@SuppressWarnings("requires-automatic")
module io.rdma4j.netty {
    requires transitive io.rdma4j.core;
    requires transitive io.netty.transport;
    requires transitive io.netty.buffer;
    requires transitive io.netty.common;
    // RdmaLoopResources only: applications that use Reactor Netty require it themselves
    requires static reactor.netty.core;
    requires static reactor.core;

    exports io.rdma4j.netty;
    exports io.rdma4j.netty.reactor;
}
