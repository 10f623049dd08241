/** An application of rdma-core's API on the module path: it requires rdma-core and nothing else. */
module rdma4j.consumer {
    requires io.rdma4j.core;
}
