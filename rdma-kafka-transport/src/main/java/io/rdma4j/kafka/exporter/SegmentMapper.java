package io.rdma4j.kafka.exporter;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;

/**
 * Turns a segment file into the memory that is registered. The real one maps the file read-only;
 * tests substitute one that exports a tampered copy.
 */
@FunctionalInterface
public interface SegmentMapper {

    /** Maps {@code size} bytes (never more than the file holds) of {@code file}, owned by {@code arena}. */
    MemorySegment map(Path file, FileChannel channel, long size, Arena arena) throws IOException;

    SegmentMapper READ_ONLY = (file, channel, size, arena) -> channel.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
}
