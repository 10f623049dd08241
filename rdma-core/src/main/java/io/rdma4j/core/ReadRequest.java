package io.rdma4j.core;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * One read of a batch: {@code sink.byteSize()} bytes from {@code remoteOffset} of the remote region into
 * {@code sink}, which must lie inside a region registered locally with {@link Access#LOCAL_WRITE}.
 */
public record ReadRequest(RegionDescriptor remote, long remoteOffset, MemorySegment sink) {
    public ReadRequest {
        Objects.requireNonNull(remote, "remote");
        Objects.requireNonNull(sink, "sink");
    }
}
