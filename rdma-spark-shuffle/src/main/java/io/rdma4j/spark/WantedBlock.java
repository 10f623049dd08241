package io.rdma4j.spark;

import org.apache.spark.storage.ShuffleBlockId;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** One block a reduce task reads, as Spark asked for it: the block and the index of the map task that wrote it. */
record WantedBlock(ShuffleBlockId blockId, int mapIndex) {

    /** The wanted blocks grouped by map output, in the order first asked. */
    static Map<Long, List<WantedBlock>> byMap(List<WantedBlock> wanted) {
        Map<Long, List<WantedBlock>> byMap = new LinkedHashMap<>();
        for (WantedBlock w : wanted) {
            byMap.computeIfAbsent(w.blockId().mapId(), k -> new ArrayList<>()).add(w);
        }
        return byMap;
    }
}
