package io.rdma4j.spark;

import io.rdma4j.core.ProtocolException;
import org.apache.spark.network.shuffle.ExecutorDiskUtils;
import org.apache.spark.storage.ShuffleBlockId;
import org.apache.spark.storage.ShuffleDataBlockId;
import org.apache.spark.storage.ShuffleIndexBlockId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Reads the committed map outputs of another executor on this host straight from its files, as Spark's own reader
 * does with {@code spark.shuffle.readHostLocalDisk}: each map output's index entries for the wanted partitions, then
 * the data file's byte range they span, mapped read-only (the page cache's pages, no copy). The index entries pass the
 * checks a peer's would ({@link ShuffleIndexFormat#checkEntries}). One instance per reduce task; its arena, which
 * owns every mapping, is closed with the task.
 */
final class HostLocalMapOutputs implements AutoCloseable {

    /** One block read from a file. */
    record Block(ShuffleBlockId blockId, ByteBuffer bytes) { }

    private static final Logger LOG = LoggerFactory.getLogger(HostLocalMapOutputs.class);

    private final int shuffleId;
    private final int subDirsPerLocalDir;
    private final Arena arena = Arena.ofShared();

    HostLocalMapOutputs(int shuffleId, int subDirsPerLocalDir) {
        this.shuffleId = shuffleId;
        this.subDirsPerLocalDir = subDirsPerLocalDir;
    }

    /**
     * The non-empty blocks of {@code wanted} (all of one executor) from the files under its {@code localDirs}.
     *
     * @throws IOException       a file is missing or unreadable (the executor is gone, or its files were removed)
     * @throws ProtocolException an index file holds entries no Spark index file holds
     */
    List<Block> read(List<String> localDirs, List<WantedBlock> wanted) throws IOException {
        String[] dirs = localDirs.toArray(String[]::new);
        List<Block> blocks = new ArrayList<>();
        for (Map.Entry<Long, List<WantedBlock>> map : WantedBlock.byMap(wanted).entrySet()) {
            long mapId = map.getKey();
            int min = map.getValue().stream().mapToInt(w -> w.blockId().reduceId()).min().orElseThrow();
            int max = map.getValue().stream().mapToInt(w -> w.blockId().reduceId()).max().orElseThrow();
            long[] entries;
            Path index = Path.of(ExecutorDiskUtils.getFilePath(dirs, subDirsPerLocalDir, new ShuffleIndexBlockId(shuffleId, mapId, 0).name()));
            try (FileChannel in = FileChannel.open(index, StandardOpenOption.READ)) {
                entries = ShuffleIndexFormat.readIndex(in, min, max, index);
            }
            Path data = Path.of(ExecutorDiskUtils.getFilePath(dirs, subDirsPerLocalDir, new ShuffleDataBlockId(shuffleId, mapId, 0).name()));
            try (FileChannel in = FileChannel.open(data, StandardOpenOption.READ)) {
                ShuffleIndexFormat.checkEntries(entries, in.size());
                long start = entries[0];
                long end = entries[entries.length - 1];
                if (end == start) {
                    continue;
                }
                MemorySegment range = in.map(FileChannel.MapMode.READ_ONLY, start, end - start, arena);
                for (WantedBlock w : map.getValue()) {
                    ShuffleBlockId id = w.blockId();
                    long offset = entries[id.reduceId() - min];
                    long length = entries[id.reduceId() - min + 1] - offset;
                    if (length > 0) {
                        blocks.add(new Block(id, range.asSlice(offset - start, length).asByteBuffer()));
                    }
                }
            }
        }
        return blocks;
    }

    /** {@link #read}, or null (logged) when the files cannot be read: the caller then reads them through the transport. */
    List<Block> readOrNull(String executorId, List<String> localDirs, List<WantedBlock> wanted) {
        try {
            return read(localDirs, wanted);
        } catch (IOException | ProtocolException e) {
            LOG.info("rdma4j shuffle: cannot read the map outputs of executor {} on this host from its files ({}); reading them "
                    + "through the transport", executorId, e.toString());
            return null;
        }
    }

    @Override
    public void close() {
        arena.close();
    }
}
