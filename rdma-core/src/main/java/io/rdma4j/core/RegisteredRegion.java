package io.rdma4j.core;

import java.lang.foreign.MemorySegment;
import java.util.Set;

/**
 * Native memory registered with a transport. Peers reach it through its {@link #descriptor()}; closing
 * it revokes the key at once (operations that arrive later fail with
 * {@link RemoteAccessException.Reason#UNKNOWN_KEY}) and returns only when no provider still touches the
 * memory, so the caller may free the memory right after {@code close()}.
 */
public interface RegisteredRegion extends AutoCloseable {

    /** The registered memory. */
    MemorySegment segment();

    /** What peers need to access this region; send its {@link RegionDescriptor#toBytes()} to them. */
    RegionDescriptor descriptor();

    Set<Access> access();

    boolean isOpen();

    /** Deregisters. Idempotent. */
    @Override
    void close();
}
