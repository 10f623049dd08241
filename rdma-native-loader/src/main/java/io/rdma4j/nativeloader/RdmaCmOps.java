package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.rdma_addr;
import io.rdma4j.nativeloader.bindings.rdma_cm_id;
import io.rdma4j.nativeloader.bindings.rdma_route;
import io.rdma4j.nativeloader.bindings.sockaddr_storage;

import java.lang.foreign.MemorySegment;

/**
 * The rdma_cma.h functions that are {@code static inline} (not exported by librdmacm):
 * {@code rdma_get_local_addr} and {@code rdma_get_peer_addr} return {@code &id->route.addr.src_addr}
 * and {@code &id->route.addr.dst_addr}. Offsets come from the generated layouts.
 */
public final class RdmaCmOps {

    static final long SRC_ADDR = rdma_cm_id.route$offset() + rdma_route.addr$offset() + rdma_addr.src_addr$offset();
    static final long DST_ADDR = rdma_cm_id.route$offset() + rdma_route.addr$offset() + rdma_addr.dst_addr$offset();
    private static final long ID_SIZE = rdma_cm_id.layout().byteSize();
    private static final long STORAGE_SIZE = sockaddr_storage.layout().byteSize();

    private RdmaCmOps() {
    }

    /**
     * {@code rdma_get_local_addr(id)}: a {@code struct sockaddr *} view of {@code sockaddr_storage} size
     * into the id (valid while the id lives).
     */
    public static MemorySegment localAddress(MemorySegment id) {
        return id.reinterpret(ID_SIZE).asSlice(SRC_ADDR, STORAGE_SIZE);
    }

    /** {@code rdma_get_peer_addr(id)}, like {@link #localAddress(MemorySegment)}. */
    public static MemorySegment peerAddress(MemorySegment id) {
        return id.reinterpret(ID_SIZE).asSlice(DST_ADDR, STORAGE_SIZE);
    }
}
