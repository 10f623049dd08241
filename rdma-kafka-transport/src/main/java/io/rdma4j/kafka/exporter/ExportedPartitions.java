package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The partitions an exporter serves: one {@link PartitionExport} per partition directory found in the broker's log
 * dirs, exported once its directory appears and closed once it is gone. Regions replaced by a newer registration of
 * their segment wait in {@link RetiredRegions} until their grace is over.
 */
final class ExportedPartitions implements AutoCloseable {

    // <topic>-<partition>; deleted (…-delete), future (…-future) and stray directories carry a suffix and do not match.
    private static final Pattern PARTITION_DIR = Pattern.compile("(.+)-(\\d+)");

    private final ExporterConfig config;
    private final RdmaTransport transport;
    private final SegmentMapper mapper;
    private final RetiredRegions retired;
    private final Map<TopicPartition, PartitionExport> exports = new ConcurrentHashMap<>();

    ExportedPartitions(ExporterConfig config, RdmaTransport transport, SegmentMapper mapper) {
        this.config = config;
        this.transport = transport;
        this.mapper = mapper;
        this.retired = new RetiredRegions(config.retireGrace());
    }

    /** Exports the partition directories that appeared in the log dirs, and closes the exports of those gone. */
    void discover() throws IOException {
        Map<TopicPartition, Path> found = partitionDirectories(config.logDirs(), config.exportInternalTopics());
        for (var e : found.entrySet()) {
            exports.computeIfAbsent(e.getKey(), tp -> new PartitionExport(tp, e.getValue(), transport, mapper, retired,
                    config.retireGrace()));
        }
        for (var it = exports.entrySet().iterator(); it.hasNext(); ) {
            var e = it.next();
            if (!found.containsKey(e.getKey())) {
                it.remove();
                e.getValue().close();
            }
        }
    }

    /**
     * The partition directories in {@code logDirs} (a log dir that does not exist has none). The metadata log is never
     * a partition to read; Kafka's other internal topics are one only with {@code exportInternalTopics}.
     */
    static Map<TopicPartition, Path> partitionDirectories(List<Path> logDirs, boolean exportInternalTopics) throws IOException {
        Map<TopicPartition, Path> found = new HashMap<>();
        for (Path dir : logDirs) {
            if (!Files.isDirectory(dir)) {
                continue;
            }
            try (var entries = Files.list(dir)) {
                for (Path p : (Iterable<Path>) entries::iterator) {
                    Matcher m = PARTITION_DIR.matcher(p.getFileName().toString());
                    if (m.matches() && Files.isDirectory(p) && !m.group(1).startsWith("__cluster_metadata")
                            && (exportInternalTopics || !ExporterConfig.isInternalTopic(m.group(1)))) {
                        found.put(new TopicPartition(m.group(1), Integer.parseInt(m.group(2))), p);
                    }
                }
            }
        }
        return found;
    }

    /** The export of {@code tp}, or null when it is not exported. */
    PartitionExport get(TopicPartition tp) {
        return exports.get(tp);
    }

    /** The watermark published for {@code tp}, or null while it is not exported or has none yet. */
    Watermark published(TopicPartition tp) {
        PartitionExport p = exports.get(tp);
        return p == null ? null : p.published();
    }

    /** Every export, as it is while the caller iterates. */
    Collection<PartitionExport> all() {
        return exports.values();
    }

    /** The exported partitions now. */
    List<TopicPartition> partitions() {
        return List.copyOf(exports.keySet());
    }

    boolean isEmpty() {
        return exports.isEmpty();
    }

    int size() {
        return exports.size();
    }

    /** Segment registrations replaced because the high watermark moved, over every export. */
    long remaps() {
        return exports.values().stream().mapToLong(PartitionExport::remaps).sum();
    }

    /** Closes the retired regions whose grace is over. */
    void closeRetiredDue() {
        retired.closeDue(false);
    }

    /** Closes every export and every retired region, whatever its grace. */
    @Override
    public void close() {
        exports.values().forEach(PartitionExport::close);
        exports.clear();
        retired.closeDue(true);
    }
}
