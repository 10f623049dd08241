package io.rdma4j.spark;

import io.rdma4j.core.ProtocolException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The index and checksum layout as Spark's IndexShuffleBlockResolver writes it: big-endian longs. */
class ShuffleIndexFormatTest {

    @Test
    void readsTheEntriesBoundingAPartitionRangeFromAFileAndFromMemory(@TempDir Path dir) throws IOException {
        Path index = dir.resolve("shuffle_0_1_0.index");
        long[] offsets = {0, 10, 10, 25, 40};
        try (DataOutputStream out = new DataOutputStream(Files.newOutputStream(index))) { // as Spark writes it
            for (long o : offsets) {
                out.writeLong(o);
            }
        }
        try (FileChannel in = FileChannel.open(index, StandardOpenOption.READ)) {
            assertThat(ShuffleIndexFormat.readIndex(in, 1, 2, index)).containsExactly(10, 10, 25);
            assertThatThrownBy(() -> ShuffleIndexFormat.readIndex(in, 2, 4, index)).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("ends before the entries of partition 4");
        }
        MemorySegment copy = MemorySegment.ofArray(Files.readAllBytes(index));
        assertThat(ShuffleIndexFormat.entry(copy, ShuffleIndexFormat.entryOffset(3), 0)).isEqualTo(25);
        assertThat(ShuffleIndexFormat.entries(copy, ShuffleIndexFormat.entryOffset(1), 3)).containsExactly(10, 10, 25);
        assertThat(ShuffleIndexFormat.indexBytes(1, 2)).isEqualTo(24);
        assertThat(ShuffleIndexFormat.checksumBytes(1, 2)).isEqualTo(16);
    }
}
