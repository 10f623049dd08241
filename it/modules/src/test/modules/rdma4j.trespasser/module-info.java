/** Reads both rdma4j modules, so that only their exports stand between it and their packages. */
module rdma4j.trespasser {
    requires io.rdma4j.core;
    requires io.rdma4j.nativeloader;
}
