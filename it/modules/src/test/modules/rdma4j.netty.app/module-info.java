/** A Netty application on the module path: the Netty transport brings rdma-core and Netty's modules with it. */
module rdma4j.netty.app {
    requires io.rdma4j.netty;
}
