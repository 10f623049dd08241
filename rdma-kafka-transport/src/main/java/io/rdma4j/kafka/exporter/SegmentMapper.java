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

    /**
     * Maps the file shared and writable (the exporter never writes to it). Soft-RoCE ({@code rdma_rxe}, seen on
     * Debian's 6.1 kernel in the soft-RDMA lab) pins only writable mappings: registering a {@link #READ_ONLY}
     * mapping fails with EFAULT ("rxe_mr_init_user: Unable to pin memory region err = -14"), even for
     * REMOTE_READ-only access. Needs write permission on the log files.
     */
    SegmentMapper SHARED_WRITABLE = (file, channel, size, arena) -> {
        // The mapping stays valid after this channel closes; the caller's channel is read-only.
        try (FileChannel writable = FileChannel.open(file, java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE)) {
            return writable.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
        }
    };
}
