package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Which directories of a broker's log dirs are partitions to export, laid out as Kafka names them, and the exports
 * kept in line with them as partitions appear and go.
 */
class ExportedPartitionsTest {

    @TempDir
    Path logs;

    @Test
    void onlyPartitionDirectoriesAreFoundAndTheMetadataLogNever() throws IOException {
        Path first = Files.createDirectory(logs.resolve("first"));
        Path second = Files.createDirectory(logs.resolve("second"));
        Files.createDirectory(first.resolve("orders-0"));
        Files.createDirectory(first.resolve("my-topic-12"));
        Files.createDirectory(first.resolve("orders-1.6f1a9c0e2d5b4a3f8e7d6c5b4a392817-delete"));
        Files.createDirectory(first.resolve("orders-2.6f1a9c0e2d5b4a3f8e7d6c5b4a392817-future"));
        Files.createDirectory(first.resolve("lost+found"));
        Files.createFile(first.resolve("notes-3"));
        Files.createDirectory(second.resolve("orders-4"));
        Files.createDirectory(second.resolve("__cluster_metadata-0"));
        Files.createDirectory(second.resolve("__consumer_offsets-7"));
        List<Path> logDirs = List.of(first, second, logs.resolve("not-there"));

        assertThat(ExportedPartitions.partitionDirectories(logDirs, false)).containsOnly(
                Map.entry(new TopicPartition("orders", 0), first.resolve("orders-0")),
                Map.entry(new TopicPartition("my-topic", 12), first.resolve("my-topic-12")),
                Map.entry(new TopicPartition("orders", 4), second.resolve("orders-4")));
        assertThat(ExportedPartitions.partitionDirectories(logDirs, true)).as("internal topics when configured")
                .containsKey(new TopicPartition("__consumer_offsets", 7))
                .doesNotContainKey(new TopicPartition("__cluster_metadata", 0)).hasSize(4);
    }

    @Test
    void partitionsAreExportedWhenTheirDirectoryAppearsAndClosedWhenItGoes() throws IOException {
        Map<String, Object> props = new HashMap<>();
        props.put(ExporterConfig.LOG_DIRS, logs.toString());
        props.put(ExporterConfig.BOOTSTRAP, "127.0.0.1:9092");
        ExporterConfig config = ExporterConfig.fromProperties(props);
        TopicPartition orders = new TopicPartition("orders", 0);
        TopicPartition payments = new TopicPartition("payments", 3);
        try (RdmaTransport transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             ExportedPartitions partitions = new ExportedPartitions(config, transport, SegmentMapper.PAGE_CACHE)) {
            partitions.discover();
            assertThat(partitions.isEmpty()).isTrue();

            Files.createDirectory(logs.resolve("orders-0"));
            Files.createDirectory(logs.resolve("payments-3"));
            partitions.discover();
            PartitionExport ordersExport = partitions.get(orders);
            assertThat(partitions.partitions()).containsExactlyInAnyOrder(orders, payments);
            assertThat(ordersExport.directory()).isEqualTo(logs.resolve("orders-0"));
            assertThat(partitions.published(orders)).as("no watermark before the first publish").isNull();

            partitions.discover();
            assertThat(partitions.get(orders)).as("an export lives as long as its directory").isSameAs(ordersExport);

            Files.delete(logs.resolve("payments-3"));
            partitions.discover();
            assertThat(partitions.partitions()).containsExactly(orders);
            assertThat(partitions.get(payments)).isNull();
            assertThat(partitions.size()).isEqualTo(1);
        }
    }
}
