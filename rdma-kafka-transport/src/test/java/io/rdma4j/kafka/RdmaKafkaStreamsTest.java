package io.rdma4j.kafka;

import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.kafka.streams.RdmaKafkaClientSupplier;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaClientSupplier;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Kafka Streams on RDMA consumers ({@link RdmaKafkaClientSupplier}) against a real broker: a count per key with a
 * changelogged store under {@code exactly_once_v2}, whose output equals the same topology's on Kafka's own clients.
 * Its input is read by RDMA by the main consumer, and after a restart its changelog by the restore consumer.
 */
class RdmaKafkaStreamsTest {

    private static final int PARTITIONS = 3;
    private static final int KEYS = 40;
    private static final String INPUT = "streams-words";

    private static KafkaTestCluster cluster;
    private static LogExporter exporter;
    private static Admin admin;

    @TempDir
    Path stateDirs;

    @BeforeAll
    static void start() throws Exception {
        cluster = new KafkaTestCluster();
        exporter = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")));
        admin = Admin.create(Map.of("bootstrap.servers", cluster.bootstrap()));
        admin.createTopics(List.of(new NewTopic(INPUT, PARTITIONS, (short) 1))).all().get();
    }

    @AfterAll
    static void stop() {
        if (admin != null) admin.close();
        if (exporter != null) exporter.close();
        if (cluster != null) cluster.close();
    }

    @Test
    void exactlyOnceCountsEqualKafkaClientsAndEveryRecordComesByRdmaIncludingTheRestore() throws Exception {
        int first = 1500;
        produce(0, first);

        // The same topology on Kafka's own clients, the reference.
        Map<String, List<Long>> plain = runUntil("counts-plain", first, null, "plain-app");

        // On RDMA consumers: the same output, and the main consumer read every input record by RDMA.
        // Its consumers wait for their exporter connection rather than fetching through Kafka meanwhile.
        RdmaKafkaClientSupplier rdma = new RdmaKafkaClientSupplier(Map.of("rdma.fetch.enabled", "true",
                "rdma.exporter.address", "127.0.0.1:" + exporter.address().getPort(), "rdma.provider", "tcp",
                RdmaConsumerConfig.SETUP_WAIT, "30000"));
        Map<String, Long> firstRun = new HashMap<>();
        Map<String, List<Long>> got = runUntil("counts-rdma", first, rdma, "rdma-app", firstRun);
        assertThat(got).isEqualTo(plain);
        assertThat(got).isEqualTo(expectedCounts(0, first));
        assertThat(firstRun.get("main")).as("input records read by RDMA by the main consumer").isEqualTo(first)
                .isEqualTo(firstRun.get("main-consumed"));

        // Restarted (in-memory store: its state comes back from the changelog), with more input: the counts go on
        // from the restored state, and the restore consumer read the changelog by RDMA.
        int more = 600;
        produce(first, more);
        awaitChangelogExported("rdma-app");
        Map<String, Long> secondRun = new HashMap<>();
        Map<String, List<Long>> after = runUntil("counts-rdma", first + more, rdma, "rdma-app", secondRun);
        assertThat(after).isEqualTo(expectedCounts(0, first + more));
        assertThat(secondRun.get("restore")).as("changelog records restored by RDMA").isEqualTo(first)
                .isEqualTo(secondRun.get("restore-consumed"));
        assertThat(secondRun.get("main")).as("new input records read by RDMA by the main consumer").isEqualTo(more)
                .isEqualTo(secondRun.get("main-consumed"));
        System.out.printf("Kafka Streams (exactly_once_v2): main consumer %d of %d input records by RDMA; restore"
                + " consumer %d of %d changelog records by RDMA%n", firstRun.get("main") + secondRun.get("main"),
                first + more, secondRun.get("restore"), first);
    }

    /** The count topology: per key, every update (no cache) into {@code output}. */
    private static Topology topology(String output) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(INPUT, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count(Materialized.as(Stores.inMemoryKeyValueStore("counts")))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return b.build();
    }

    private Map<String, List<Long>> runUntil(String output, int outputs, KafkaClientSupplier supplier, String appId) throws Exception {
        return runUntil(output, outputs, supplier, appId, new HashMap<>());
    }

    /**
     * Runs the app until {@code output} holds {@code outputs} committed records, then closes it; {@code rdmaRecords}
     * gets the records its main and restore consumers read by RDMA ({@code main}, {@code restore}) and consumed in
     * all ({@code main-consumed}, {@code restore-consumed}: Kafka's standard metric, which counts both fetch paths). Returns each key's counts in output order.
     */
    private Map<String, List<Long>> runUntil(String output, int outputs, KafkaClientSupplier supplier, String appId,
                                             Map<String, Long> rdmaRecords) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDirs.resolve(appId).toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10_000);
        Map<String, List<Long>> counts;
        try (KafkaStreams streams = supplier == null ? new KafkaStreams(topology(output), p)
                : new KafkaStreams(topology(output), p, supplier)) {
            streams.start();
            counts = awaitOutput(output, outputs);
            for (String kind : List.of("main", "restore")) {
                String end = kind.equals("main") ? "-consumer" : "-restore-consumer";
                rdmaRecords.put(kind, consumerMetric(streams, end, RdmaFetchMetrics.GROUP, "records-rdma-total"));
                rdmaRecords.put(kind + "-consumed", consumerMetric(streams, end, RdmaFetchMetrics.FETCH_MANAGER_GROUP,
                        "records-consumed-total"));
            }
            // Leaving the group: the restarted instance then need not wait out the old member's session timeout.
            streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(30)));
        }
        return counts;
    }

    /**
     * A client-level consumer metric (tagged with the client id alone) of the stream thread's consumer whose client
     * id ends so, summed over stream threads; 0 when there is none.
     */
    private static long consumerMetric(KafkaStreams streams, String clientIdEnd, String group, String name) {
        long sum = 0;
        for (Map.Entry<MetricName, ? extends Metric> m : streams.metrics().entrySet()) {
            MetricName n = m.getKey();
            String clientId = n.tags().getOrDefault("client-id", "");
            boolean match = clientIdEnd.equals("-consumer")
                    ? clientId.endsWith("-consumer") && !clientId.endsWith("-restore-consumer")
                    : clientId.endsWith(clientIdEnd);
            if (match && n.tags().size() == 1 && n.group().equals(group) && n.name().equals(name)) {
                sum += (long) ((Number) m.getValue().metricValue()).doubleValue();
            }
        }
        return sum;
    }

    /** Reads {@code output} (read_committed) until it holds {@code outputs} records; each key's values in order. */
    private static Map<String, List<Long>> awaitOutput(String output, int outputs) {
        Map<String, Object> c = new HashMap<>();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        Map<String, List<Long>> counts = new TreeMap<>();
        int seen = 0;
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new LongDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            while (tps.isEmpty() && System.nanoTime() < deadline) {
                var parts = consumer.partitionsFor(output, Duration.ofSeconds(5));
                if (parts != null) {
                    parts.forEach(pi -> tps.add(new TopicPartition(pi.topic(), pi.partition())));
                }
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            while (seen < outputs && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
                    counts.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                    seen++;
                }
            }
        }
        assertThat(seen).as("committed outputs in " + output).isEqualTo(outputs);
        return counts;
    }

    /** What the count topology writes for input records {@code from..from+n-1} read from the start. */
    private static Map<String, List<Long>> expectedCounts(int from, int n) {
        Map<String, List<Long>> out = new TreeMap<>();
        for (int i = from; i < from + n; i++) {
            List<Long> l = out.computeIfAbsent(key(i), k -> new ArrayList<>());
            l.add((long) l.size() + 1);
        }
        return out;
    }

    private static String key(int i) {
        return "key-" + (i * 7 % KEYS);
    }

    /** Produces input records {@code from..from+n-1} and waits until the exporter serves them. */
    private static void produce(int from, int n) throws Exception {
        Map<String, Object> p = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        Map<TopicPartition, Long> ends = new LinkedHashMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            List<Future<org.apache.kafka.clients.producer.RecordMetadata>> acks = IntStream.range(from, from + n)
                    .mapToObj(i -> producer.send(new ProducerRecord<>(INPUT, key(i), "word-" + i))).toList();
            for (var ack : acks) {
                var sent = ack.get();
                ends.merge(new TopicPartition(sent.topic(), sent.partition()), sent.offset() + 1, Math::max);
            }
        }
        for (var end : ends.entrySet()) {
            awaitExported(end.getKey(), end.getValue());
        }
    }

    private static void awaitChangelogExported(String appId) throws Exception {
        String changelog = appId + "-counts-changelog";
        var ends = admin.listOffsets(IntStream.range(0, PARTITIONS).boxed().collect(java.util.stream.Collectors.toMap(
                i -> new TopicPartition(changelog, i), i -> org.apache.kafka.clients.admin.OffsetSpec.latest()))).all().get();
        for (var e : ends.entrySet()) {
            awaitExported(e.getKey(), e.getValue().offset());
        }
    }

    private static void awaitExported(TopicPartition tp, long highWatermark) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (exporter.exportedHighWatermark(tp) < highWatermark) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("exporter did not serve " + tp + " up to offset " + highWatermark + " within 30 s");
            }
            Thread.sleep(20);
        }
    }
}
