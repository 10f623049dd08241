package io.rdma4j.spark;

import io.rdma4j.core.ProtocolException;
import org.apache.spark.network.shuffle.ExecutorDiskUtils;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.storage.ShuffleDataBlockId;
import org.apache.spark.storage.ShuffleIndexBlockId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Map outputs of an executor on this host, read from files laid out as Spark's disk block manager lays them out. */
class HostLocalMapOutputsTest {

    private static final int SUB_DIRS = 4;

    @Test
    void readsTheWantedNonEmptyBlocksFromTheFilesOfEachMapOutput(@TempDir Path dir) throws IOException {
        String[] localDirs = {dir.toString()};
        write(localDirs, 7, 1, "aaa", "", "bbbb", "cc"); // partition 1 of map 1 is empty
        write(localDirs, 7, 2, "dd", "eeeee", "", "f");
        try (HostLocalMapOutputs outputs = new HostLocalMapOutputs(7, SUB_DIRS)) {
            List<HostLocalMapOutputs.Block> blocks = outputs.read(List.of(dir.toString()), List.of(
                    wanted(7, 1, 0), wanted(7, 1, 1), wanted(7, 1, 2), wanted(7, 2, 1), wanted(7, 2, 3)));
            assertThat(blocks).extracting(b -> b.blockId().name() + "=" + text(b.bytes())).containsExactly(
                    "shuffle_7_1_0=aaa", "shuffle_7_1_2=bbbb", "shuffle_7_2_1=eeeee", "shuffle_7_2_3=f");
        }
    }

    @Test
    void missingFilesAndCorruptIndexesAreReportedSoTheCallerReadsThroughTheTransport(@TempDir Path dir) throws IOException {
        String[] localDirs = {dir.toString()};
        try (HostLocalMapOutputs outputs = new HostLocalMapOutputs(3, SUB_DIRS)) {
            assertThatThrownBy(() -> outputs.read(List.of(dir.toString()), List.of(wanted(3, 9, 0)))).isInstanceOf(IOException.class);
            assertThat(outputs.readOrNull("exec-2", List.of(dir.toString()), List.of(wanted(3, 9, 0)))).isNull();
            write(localDirs, 3, 5, "abc");
            Path data = Path.of(ExecutorDiskUtils.getFilePath(localDirs, SUB_DIRS, new ShuffleDataBlockId(3, 5, 0).name()));
            Files.write(data, new byte[1]); // shorter than the index says
            assertThatThrownBy(() -> outputs.read(List.of(dir.toString()), List.of(wanted(3, 5, 0))))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("beyond the data file's 1 bytes");
        }
    }

    private static WantedBlock wanted(int shuffle, long map, int reduce) {
        return new WantedBlock(new ShuffleBlockId(shuffle, map, reduce), (int) map);
    }

    /** A map output's data file and index file (partitions + 1 big-endian offsets), where Spark puts them. */
    private static void write(String[] localDirs, int shuffle, long map, String... partitions) throws IOException {
        Path index = Path.of(ExecutorDiskUtils.getFilePath(localDirs, SUB_DIRS, new ShuffleIndexBlockId(shuffle, map, 0).name()));
        Path data = Path.of(ExecutorDiskUtils.getFilePath(localDirs, SUB_DIRS, new ShuffleDataBlockId(shuffle, map, 0).name()));
        Files.createDirectories(index.getParent());
        StringBuilder all = new StringBuilder();
        try (DataOutputStream out = new DataOutputStream(Files.newOutputStream(index))) {
            out.writeLong(0);
            for (String p : partitions) {
                all.append(p);
                out.writeLong(all.length());
            }
        }
        Files.writeString(data, all, StandardCharsets.US_ASCII);
    }

    private static String text(ByteBuffer bytes) {
        return StandardCharsets.US_ASCII.decode(bytes.duplicate()).toString();
    }
}
