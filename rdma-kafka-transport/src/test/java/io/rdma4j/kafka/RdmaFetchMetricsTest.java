package io.rdma4j.kafka;

import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The RDMA fetch metrics and the adjusted standard fetch metrics in {@code consumer.metrics()}, and the INFO line of a
 * fallback, against a real broker. Byte and batch counts are checked against the partition's log files on disk.
 */
class RdmaFetchMetricsTest {

    private static KafkaTestCluster cluster;
    private static Admin admin;

    @BeforeAll
    static void start() throws Exception {
        cluster = new KafkaTestCluster();
        admin = Admin.create(Map.of("bootstrap.servers", cluster.bootstrap()));
    }

    @AfterAll
    static void stop() {
        if (admin != null) admin.close();
        if (cluster != null) cluster.close();
    }

    @Test
    void rdmaReadsAreCountedInTheRdmaGroupAndInTheStandardFetchMetrics() throws Exception {
        String topic = topic(2);
        assertThat(KafkaFixtures.RDMA_METRICS_GROUP).as("the group the shared fixtures read").isEqualTo(RdmaFetchMetrics.GROUP);
        try (LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")))) {
            produce(topic, 1000, exporter);
            // One RDMA read per partition holds the whole log, so every batch is read (and counted) exactly once.
            try (Consumer<String, String> c = consumer("metrics-rdma", KafkaFixtures.address(exporter.address()),
                    KafkaFixtures.waitingForRdma(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100000")))) {
                List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
                c.assign(tps);
                c.seekToBeginning(tps);
                KafkaFixtures.pollUntil(c, 1000);
                assertThat(KafkaFixtures.rdmaRecords(c)).isEqualTo(1000);

                long[] log = logBytesAndBatches(topic, 2);
                assertThat(log[1]).as("batches in the log files").isPositive();
                String id = "metrics-rdma";
                assertThat(rdma(c, id, "records-rdma-total")).isEqualTo(1000.0);
                assertThat(rdma(c, id, "bytes-rdma-total")).as("bytes of the log files").isEqualTo((double) log[0]);
                assertThat(rdma(c, id, "batches-rdma-total")).as("batches of the log files").isEqualTo((double) log[1]);
                assertThat(rdma(c, id, "records-rdma-rate")).isPositive();
                assertThat(rdma(c, id, "crc-failures-total")).isZero();
                assertThat(rdma(c, id, "retries-total")).isZero();
                assertThat(rdma(c, id, "transport-connections")).as("one connection, to the exporter").isEqualTo(1.0);
                assertThat(rdma(c, id, "transport-registered-bytes")).as("the read buffers").isPositive();
                assertThat(rdma(c, id, "transport-buffered-bytes")).isNotNegative();
                assertThat(rdma(c, id, "transport-message-buffer-bytes")).as("tcp registers no message buffers").isZero();
                assertThat(rdma(c, id, "transport-receive-credits-lent")).as("tcp lends no receive credits").isZero();
                double avg = rdma(c, id, "read-latency-avg");
                assertThat(avg).isPositive();
                assertThat(rdma(c, id, "read-latency-max")).isGreaterThanOrEqualTo(avg);
                for (FallbackReason r : FallbackReason.values()) {
                    if (r != FallbackReason.EXPORTER_CONNECTING) { // Counted if the first fetch came before the connection.
                        assertThat(fallbacks(c, id, r)).as("fallbacks-total{reason=%s}", r.tag()).isZero();
                    }
                }
                // The internal consumer returned nothing; the standard metrics count what RDMA returned.
                assertThat(standard(c, id, "records-consumed-total")).isEqualTo(1000.0);
                assertThat(standard(c, id, "bytes-consumed-total")).isEqualTo((double) log[0]);
                assertThat(standard(c, id, "records-consumed-rate")).isPositive();
                assertThat(standard(c, id, "bytes-consumed-rate")).isPositive();
                // kafka-metrics-count is the internal consumer's: it counts every metric but the RDMA group and the
                // records-lag this consumer adds for the two partitions the internal consumer never fetched.
                Map<MetricName, ? extends Metric> all = c.metrics();
                long internal = all.keySet().stream().filter(n -> !n.group().equals(RdmaFetchMetrics.GROUP)
                        && !(n.name().equals("records-lag") && n.group().equals("consumer-fetch-manager-metrics"))).count();
                MetricName count = new MetricName("count", "kafka-metrics-count", "", Map.of("client-id", id));
                assertThat(((Number) all.get(count).metricValue()).doubleValue()).isEqualTo((double) internal);
            }
        }
    }

    @Test
    void fallbackIsCountedByReasonLoggedOncePerPartitionAndBothPathsCountInTheStandardMetrics() throws Exception {
        String topic = topic(2);
        String id = "metrics-fallback";
        LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")));
        // The first records are RDMA's (the consumer waits for its connection), those after the exporter went Kafka's.
        try (Consumer<String, String> c = consumer(id, KafkaFixtures.address(exporter.address()),
                KafkaFixtures.waitingForRdma(Map.of("rdma.fetch.fallback.backoff.ms", "60000")))) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            try {
                produce(topic, 500, exporter);
                c.assign(tps);
                c.seekToBeginning(tps);
                KafkaFixtures.pollUntil(c, 500);
                KafkaFixtures.assertReadByRdma(c, 500, "the first 500 records");
            } finally {
                exporter.close();
            }
            double rdmaBefore = rdma(c, id, "records-rdma-total");
            double connectingBefore = fallbacks(c, id, FallbackReason.EXPORTER_CONNECTING);
            produce(topic, 500, null);
            String log = capturingStandardError(() -> {
                KafkaFixtures.pollUntil(c, 500); // the normal fetch path, the exporter being gone
                KafkaFixtures.pollUntil(c, 0);
            });
            assertThat(rdma(c, id, "records-rdma-total")).as("by RDMA, all before the exporter went").isEqualTo(rdmaBefore);
            assertThat(standard(c, id, "records-consumed-total")).as("RDMA and normal fetch together").isEqualTo(1000.0);
            // Each partition's failed READ starts a reconnect, Kafka's fetch serving while it is under way (the refused
            // connect may be over before the partition's fetch asks), then the fallback period of an unreachable exporter.
            assertThat(fallbacks(c, id, FallbackReason.EXPORTER_CONNECTING) - connectingBefore).as("at most one per partition")
                    .isBetween(0.0, 2.0);
            assertThat(fallbacks(c, id, FallbackReason.EXPORTER_UNREACHABLE)).as("one per partition").isEqualTo(2.0);
            for (FallbackReason r : FallbackReason.values()) {
                if (r != FallbackReason.EXPORTER_UNREACHABLE && r != FallbackReason.EXPORTER_CONNECTING) {
                    assertThat(fallbacks(c, id, r)).as("fallbacks-total{reason=%s}", r.tag()).isZero();
                }
            }
            List<String> info = log.lines().filter(l -> l.contains(" INFO ") && l.contains("fetched through Kafka")).toList();
            for (TopicPartition tp : tps) {
                List<String> lines = info.stream().filter(l -> l.contains(" " + tp + " ")).toList();
                assertThat(lines).as("INFO lines of %s in:%n%s", tp, log).hasSizeBetween(1, 2);
                assertThat(lines.getFirst()).contains(tp + " stops being read by RDMA: it is fetched through Kafka");
                assertThat(lines.getLast()).contains("for 60000 ms because the log exporter cannot be reached");
                if (lines.size() == 2) {
                    assertThat(lines.getFirst()).contains("until that is ready, for at most 60000 ms because its connection to "
                            + "the log exporter is being set up");
                }
            }
        }
    }

    @Test
    void lagOfAPartitionServedByRdmaIsTheHighWatermarkMinusItsPosition() throws Exception {
        String topic = topic(1);
        String id = "metrics-lag";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")))) {
            produce(topic, 1000, exporter);
            try (Consumer<String, String> c = consumer(id, KafkaFixtures.address(exporter.address()),
                    KafkaFixtures.waitingForRdma(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100")))) {
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                int got = 0;
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (got == 0 && System.nanoTime() < deadline) {
                    got = c.poll(java.time.Duration.ofMillis(200)).count();
                }
                assertThat(got).as("records of the first poll").isBetween(1, 100);
                assertThat(c.position(tp)).isEqualTo(got);
                MetricName lag = new MetricName("records-lag", RdmaFetchMetrics.GROUP, "",
                        Map.of("client-id", id, "topic", topic, "partition", "0"));
                assertThat(value(c, lag)).isEqualTo(1000.0 - got);
                assertThat(rdma(c, id, "records-lag-max")).isEqualTo(1000.0 - got);
                // The standard metrics show it too: the internal consumer never fetched this partition.
                MetricName standardLag = new MetricName("records-lag", "consumer-fetch-manager-metrics", "",
                        Map.of("client-id", id, "topic", topic, "partition", "0"));
                assertThat(value(c, standardLag)).isEqualTo(1000.0 - got);
                assertThat(standard(c, id, "records-lag-max")).isEqualTo(1000.0 - got);
                KafkaFixtures.pollUntil(c, 1000 - got);
                assertThat(value(c, lag)).as("caught up").isZero();
                assertThat(value(c, standardLag)).as("caught up").isZero();
                c.assign(List.of(new TopicPartition(topic(1), 0)));
                c.poll(java.time.Duration.ofMillis(10));
                assertThat(c.metrics()).as("no lag for an unassigned partition").doesNotContainKey(lag).doesNotContainKey(standardLag);
            }
        }
    }

    /** Runs {@code body} with standard error (where slf4j-simple writes) copied into the returned text. */
    static String capturingStandardError(ThrowingRunnable body) throws Exception {
        PrintStream original = System.err;
        ByteArrayOutputStream copy = new ByteArrayOutputStream();
        PrintStream tee = new PrintStream(new java.io.OutputStream() {
            @Override public synchronized void write(int b) { copy.write(b); original.write(b); }
            @Override public synchronized void write(byte[] b, int off, int len) { copy.write(b, off, len); original.write(b, off, len); }
        }, true, StandardCharsets.UTF_8);
        System.setErr(tee);
        try {
            body.run();
        } finally {
            System.setErr(original);
        }
        synchronized (tee) {
            return copy.toString(StandardCharsets.UTF_8);
        }
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    private static double rdma(Consumer<?, ?> c, String clientId, String name) {
        return value(c, new MetricName(name, RdmaFetchMetrics.GROUP, "", Map.of("client-id", clientId)));
    }

    private static double fallbacks(Consumer<?, ?> c, String clientId, FallbackReason reason) {
        return value(c, new MetricName("fallbacks-total", RdmaFetchMetrics.GROUP, "",
                Map.of("client-id", clientId, "reason", reason.tag())));
    }

    private static double standard(Consumer<?, ?> c, String clientId, String name) {
        return value(c, new MetricName(name, "consumer-fetch-manager-metrics", "", Map.of("client-id", clientId)));
    }

    private static double value(Consumer<?, ?> c, MetricName name) {
        Map<MetricName, ? extends Metric> all = c.metrics();
        assertThat(all).as("metrics of the consumer").containsKey(name);
        return ((Number) all.get(name).metricValue()).doubleValue();
    }

    /** Bytes and record batches in the partitions' log files, walked by each batch's length field. */
    private static long[] logBytesAndBatches(String topic, int partitions) throws Exception {
        long bytes = 0;
        long batches = 0;
        for (int p = 0; p < partitions; p++) {
            Path dir = Path.of(cluster.logDirs().split(",")[0], topic + "-" + p);
            List<Path> logs;
            try (Stream<Path> files = Files.list(dir)) {
                logs = files.filter(f -> f.toString().endsWith(".log")).toList();
            }
            for (Path f : logs) {
                ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(f));
                bytes += b.remaining();
                for (int pos = 0; pos < b.limit(); pos += 12 + b.getInt(pos + 8)) {
                    batches++;
                }
            }
        }
        return new long[] {bytes, batches};
    }

    private Consumer<String, String> consumer(String clientId, String exporterAddress, Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put("rdma.fetch.enabled", "true");
        p.put("rdma.exporter.address", exporterAddress);
        p.put("rdma.provider", "tcp");
        p.putAll(extra);
        return RdmaConsumerFactory.create(p, null, null);
    }

    private static String topic(int partitions) throws Exception {
        String name = "m-" + UUID.randomUUID().toString().substring(0, 8);
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get();
        Map<TopicPartition, OffsetSpec> latest = new LinkedHashMap<>();
        IntStream.range(0, partitions).forEach(p -> latest.put(new TopicPartition(name, p), OffsetSpec.latest()));
        KafkaFixtures.awaitLeaders(admin, latest);
        return name;
    }

    /** Produces {@code count} acknowledged records and, given an exporter, waits until it serves them. */
    private static void produce(String topic, int count, LogExporter exporter) throws Exception {
        Map<String, Object> p = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap(),
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        Map<TopicPartition, Long> ends = new HashMap<>();
        try (Producer<String, String> producer = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> acks = new java.util.ArrayList<>();
            for (int i = 0; i < count; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, "k" + i, "v".repeat(100) + i)));
            }
            producer.flush();
            for (var ack : acks) {
                var m = ack.get();
                ends.merge(new TopicPartition(m.topic(), m.partition()), m.offset() + 1, Math::max);
            }
        }
        assertThat(ends.values().stream().mapToLong(Long::longValue).sum()).as("offsets produced").isGreaterThanOrEqualTo(count);
        if (exporter != null) {
            long deadline = System.nanoTime() + 30_000_000_000L;
            for (var e : ends.entrySet()) {
                while (exporter.exportedHighWatermark(e.getKey()) < e.getValue()) {
                    assertThat(System.nanoTime()).as("exporter serves %s up to %d", e.getKey(), e.getValue()).isLessThan(deadline);
                    Thread.sleep(20);
                }
            }
        }
    }
}
