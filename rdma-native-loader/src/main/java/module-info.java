/**
 * rdma4j's native boundary: library loading, the typed downcalls into libibverbs and librdmacm, and device
 * discovery. It is the only module that calls restricted FFM methods, so it is the one to name in
 * {@code --enable-native-access=io.rdma4j.nativeloader}. Applications use rdma-core's API instead: the typed
 * boundary and discovery are exported to rdma-core alone, and the jextract bindings to no one.
 */
@SuppressWarnings("module") // rdma-core, the target of the qualified exports, is built after this module
module io.rdma4j.nativeloader {
    exports io.rdma4j.nativeloader to io.rdma4j.core;
    exports io.rdma4j.nativeloader.discovery to io.rdma4j.core;
}
