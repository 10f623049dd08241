package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Path;

/**
 * Turns a segment file into the region peers read. The real one registers the file's page cache
 * ({@link RdmaTransport#registerFile}); tests substitute one that exports a tampered copy.
 */
@FunctionalInterface
public interface SegmentMapper {

    /** Registers {@code size} bytes (never more than the file holds) of {@code file}, mapped into {@code arena}. */
    RegisteredRegion register(RdmaTransport transport, Path file, long size, Arena arena) throws IOException;

    SegmentMapper PAGE_CACHE = (transport, file, size, arena) -> transport.registerFile(file, size, arena);
}
