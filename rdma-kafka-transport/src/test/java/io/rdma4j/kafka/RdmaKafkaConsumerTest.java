package io.rdma4j.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/** The RDMA consumer returns exactly what a plain KafkaConsumer returns, against a real 4.3.1 broker. */
class RdmaKafkaConsumerTest {

    private static KafkaTestCluster cluster;
    private static LogExporter exporter;
    private static Admin admin;

    @BeforeAll
    static void start() throws Exception {
        cluster = new KafkaTestCluster();
        exporter = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")));
        admin = Admin.create(Map.of("bootstrap.servers", cluster.bootstrap()));
    }

    @AfterAll
    static void stop() throws Exception {
        if (admin != null) admin.close();
        if (exporter != null) exporter.close();
        if (cluster != null) cluster.close();
    }

    /** A record reduced to what must match: partition, offset, key, value, headers, timestamp. */
    record Seen(int partition, long offset, String key, String value, List<String> headers, long timestamp) {
        static Seen of(ConsumerRecord<String, String> r) {
            List<String> h = new ArrayList<>();
            for (Header header : r.headers()) {
                h.add(header.key() + "=" + Arrays.toString(header.value()));
            }
            return new Seen(r.partition(), r.offset(), r.key(), r.value(), h, r.timestamp());
        }
    }

    @Test
    void severalPartitionsAcrossSegmentRollsMatchPlainConsumer() throws Exception {
        String topic = topic(3, Map.of("segment.bytes", "1048576"));
        produce(topic, 6000, 1024, Map.of());
        assertSameAsPlain(topic, 3, 6000, Map.of());
        assertThat(exporter.remaps()).as("growing/rolled segments were re-registered").isPositive();
    }

    @ParameterizedTest
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void everyCompressionCodecMatchesPlainConsumer(String codec) throws Exception {
        String topic = topic(2, Map.of());
        produce(topic, 3000, 200, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, "5"));
        assertSameAsPlain(topic, 2, 3000, Map.of());
    }

    @Test
    void transactionsWithAbortsUnderBothIsolationLevels() throws Exception {
        String topic = topic(1, Map.of());
        Map<String, Object> p = producerProps(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "tx-" + topic));
        try (Producer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            for (int t = 0; t < 10; t++) {
                producer.beginTransaction();
                for (int i = 0; i < 50; i++) {
                    producer.send(new ProducerRecord<>(topic, "k" + i, "tx" + t + "-" + i));
                }
                producer.flush(); // so aborted records reach the log (abort drops unsent ones)
                if (t % 3 == 1) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
            }
        }
        // read_uncommitted: aborted records are returned too, control batches skipped, all by RDMA.
        assertSameAsPlain(topic, 1, 500, Map.of());
        // read_committed: the documented fallback to the normal fetch path; results still identical.
        List<Seen> plain = consume(plainConsumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed")), topic, 1, 350);
        try (Consumer<String, String> c = rdmaConsumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            assertThat(((RdmaKafkaConsumer<String, String>) c).rdmaActive()).isFalse();
            assertThat(consume(c, topic, 1, 350)).isEqualTo(plain);
        }
        assertThat(plain).hasSize(350);
    }

    @Test
    void seeksBackwardAndForward() throws Exception {
        String topic = topic(1, Map.of());
        produce(topic, 2000, 100, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Consumer<String, String> c = rdmaConsumer(Map.of())) {
            c.assign(List.of(tp));
            c.seek(tp, 1500);
            List<Seen> tail = pollUntil(c, 500);
            assertThat(tail.getFirst().offset()).isEqualTo(1500);
            assertThat(tail.getLast().offset()).isEqualTo(1999);
            c.seek(tp, 10);
            List<Seen> again = pollUntil(c, 1990);
            assertThat(again.getFirst().offset()).isEqualTo(10);
            assertThat(again).extracting(Seen::value).containsExactlyElementsOf(
                    java.util.stream.IntStream.range(10, 2000).mapToObj(i -> value(i, 100)).toList());
            assertThat(c.position(tp)).isEqualTo(2000);
            assertRdmaRead(c);
        }
    }

    @Test
    void corruptBatchIsDetectedByCrcAndNeverReturned() throws Exception {
        String topic = topic(1, Map.of());
        produce(topic, 1000, 100, Map.of());
        // An exporter that exports a copy of every segment with one byte flipped inside the first batch's records.
        try (LogExporter tampering = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")),
                (file, channel, size, arena) -> {
                    MemorySegment copy = arena.allocate(size, 8);
                    copy.copyFrom(MemorySegment.ofArray(Files.readAllBytes(file)).asSlice(0, size));
                    if (file.getParent().getFileName().toString().startsWith(topic) && size > 100) {
                        copy.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 80, (byte) (copy.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 80) ^ 0x5a));
                    }
                    return copy;
                })) {
            List<Seen> plain = consume(plainConsumer(Map.of()), topic, 1, 1000);
            try (Consumer<String, String> c = rdmaConsumer(Map.of("rdma.exporter.address", address(tampering)))) {
                List<Seen> got = consume(c, topic, 1, 1000);
                RdmaKafkaConsumer<String, String> r = (RdmaKafkaConsumer<String, String>) c;
                assertThat(r.crcFailures()).as("the flipped byte was caught by the CRC").isPositive();
                assertThat(got).as("the corrupt batch was fetched through Kafka instead").isEqualTo(plain);
                assertThat(r.transportMetrics().snapshot(OperationType.READ).bytes()).isPositive();
            }
        }
    }

    @Test
    void exporterKilledAndRestartedMidStreamLosesNothing() throws Exception {
        String topic = topic(1, Map.of());
        produce(topic, 1000, 100, Map.of());
        int port;
        try (var s = new java.net.ServerSocket(0)) {
            port = s.getLocalPort();
        }
        String listen = "127.0.0.1:" + port;
        LogExporter own = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps(listen)));
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Consumer<String, String> c = rdmaConsumer(Map.of("rdma.exporter.address", listen, "rdma.fetch.fallback.backoff.ms", "200"))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            List<Seen> got = new ArrayList<>(pollUntil(c, 1000));
            long readBytesBefore = ((RdmaKafkaConsumer<String, String>) c).transportMetrics().snapshot(OperationType.READ).bytes();
            assertThat(readBytesBefore).isPositive();
            own.close(); // killed mid-stream
            produce(topic, 500, 100, Map.of());
            got.addAll(pollUntil(c, 500)); // served by the normal fetch path meanwhile
            own = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps(listen)));
            Thread.sleep(300);
            produce(topic, 500, 100, Map.of());
            got.addAll(pollUntil(c, 500));
            assertThat(got).extracting(Seen::offset).containsExactlyElementsOf(
                    java.util.stream.LongStream.range(0, 2000).boxed().toList());
            assertThat(((RdmaKafkaConsumer<String, String>) c).transportMetrics().snapshot(OperationType.READ).bytes())
                    .as("RDMA reads resumed against the restarted exporter").isGreaterThan(readBytesBefore);
        } finally {
            own.close();
        }
    }

    @Test
    void interceptorsSeeEveryRecordAndCommit() throws Exception {
        String topic = topic(1, Map.of());
        produce(topic, 300, 50, Map.of());
        CountingInterceptor.consumed.set(0);
        CountingInterceptor.commits.set(0);
        try (Consumer<String, String> c = rdmaConsumer(Map.of(ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG, CountingInterceptor.class.getName(),
                ConsumerConfig.GROUP_ID_CONFIG, "g-" + topic))) {
            c.subscribe(List.of(topic));
            List<Seen> got = pollUntil(c, 300);
            c.commitSync();
            assertThat(got).hasSize(300);
            assertThat(CountingInterceptor.consumed.get()).isEqualTo(300);
            assertThat(CountingInterceptor.commits.get()).isPositive();
            assertThat(c.committed(java.util.Set.of(new TopicPartition(topic, 0))).get(new TopicPartition(topic, 0)).offset()).isEqualTo(300);
            assertRdmaRead(c);
        }
    }

    public static final class CountingInterceptor implements org.apache.kafka.clients.consumer.ConsumerInterceptor<String, String> {
        static final AtomicInteger consumed = new AtomicInteger();
        static final AtomicInteger commits = new AtomicInteger();
        @Override public org.apache.kafka.clients.consumer.ConsumerRecords<String, String> onConsume(
                org.apache.kafka.clients.consumer.ConsumerRecords<String, String> records) {
            consumed.addAndGet(records.count());
            return records;
        }
        @Override public void onCommit(Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> offsets) {
            commits.incrementAndGet();
        }
        @Override public void close() { }
        @Override public void configure(Map<String, ?> configs) { }
    }

    @Test
    void factoryReturnsPlainKafkaConsumerWhenDisabled() {
        Map<String, Object> p = new HashMap<>(consumerProps(Map.of()));
        p.put("rdma.fetch.enabled", "false");
        try (Consumer<String, String> c = RdmaConsumerFactory.create(p, new StringDeserializer(), new StringDeserializer())) {
            assertThat(c).isInstanceOf(KafkaConsumer.class);
        }
    }

    // ---- helpers ----

    static String address(LogExporter e) {
        return "127.0.0.1:" + e.address().getPort();
    }

    private void assertSameAsPlain(String topic, int partitions, int expected, Map<String, Object> extra) {
        List<Seen> plain = consume(plainConsumer(extra), topic, partitions, expected);
        try (Consumer<String, String> c = rdmaConsumer(extra)) {
            List<Seen> got = consume(c, topic, partitions, expected);
            assertThat(got).hasSize(plain.size()).isEqualTo(plain);
            assertRdmaRead(c);
            assertThat(((RdmaKafkaConsumer<String, String>) c).rdmaRecords()).as("records came by RDMA").isEqualTo(expected);
        }
        assertThat(plain).hasSize(expected);
    }

    static void assertRdmaRead(Consumer<String, String> c) {
        var read = ((RdmaKafkaConsumer<String, String>) c).transportMetrics().snapshot(OperationType.READ);
        assertThat(read.count()).as("RDMA READ operations").isPositive();
        assertThat(read.bytes()).as("RDMA READ bytes").isPositive();
    }

    /** All records of the topic, per partition in order, partitions in ascending order. */
    private static List<Seen> consume(Consumer<String, String> c, String topic, int partitions, int expected) {
        try (c) {
            List<TopicPartition> tps = java.util.stream.IntStream.range(0, partitions).mapToObj(p -> new TopicPartition(topic, p)).toList();
            c.assign(tps);
            c.seekToBeginning(tps);
            List<Seen> all = pollUntil(c, expected);
            List<Seen> sorted = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                int part = p;
                all.stream().filter(s -> s.partition() == part).forEach(sorted::add); // keeps per-partition order
            }
            return sorted;
        }
    }

    static List<Seen> pollUntil(Consumer<String, String> c, int count) {
        List<Seen> out = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (out.size() < count && System.nanoTime() < deadline) {
            c.poll(Duration.ofMillis(200)).forEach(r -> out.add(Seen.of(r)));
        }
        // One more poll: nothing beyond what was expected may show up (no duplicates).
        c.poll(Duration.ofMillis(300)).forEach(r -> out.add(Seen.of(r)));
        assertThat(out).as("records consumed").hasSize(count);
        return out;
    }

    String topic(int partitions, Map<String, String> configs) throws Exception {
        String name = "t-" + UUID.randomUUID().toString().substring(0, 8);
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs))).all().get();
        // createTopics returns once the controller has the topic, before the broker acts as its leader. A produce
        // in that window fails NOT_LEADER, and the idempotent producer's retry of its first batch then meets
        // OUT_OF_ORDER_SEQUENCE forever (later batches were appended meanwhile) until delivery.timeout.ms drops it.
        // ListOffsets is answered only by the partition's leader, so it returning means the leader is ready.
        Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> latest = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            latest.put(new TopicPartition(name, p), org.apache.kafka.clients.admin.OffsetSpec.latest());
        }
        admin.listOffsets(latest).all().get();
        return name;
    }

    static String value(int i, int size) {
        String prefix = "v" + i + "-";
        return prefix + "x".repeat(Math.max(0, size - prefix.length()));
    }

    /** Produces and checks that every record was acknowledged, so a lost send fails here and not as a short consume. */
    void produce(String topic, int count, int size, Map<String, Object> extra) throws Exception {
        List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> acks = new ArrayList<>();
        try (Producer<String, String> p = new KafkaProducer<>(producerProps(extra))) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, null, "k" + i, value(i, size));
                if (i % 7 == 0) {
                    r.headers().add("h", ("hv" + i).getBytes(StandardCharsets.UTF_8));
                }
                acks.add(p.send(r));
            }
            p.flush();
        }
        for (var ack : acks) {
            ack.get(); // throws the send's failure
        }
    }

    private Map<String, Object> producerProps(Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.putAll(extra);
        return p;
    }

    private Map<String, Object> consumerProps(Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putAll(extra);
        return p;
    }

    private Consumer<String, String> plainConsumer(Map<String, Object> extra) {
        return new KafkaConsumer<>(consumerProps(extra));
    }

    private Consumer<String, String> rdmaConsumer(Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>(consumerProps(Map.of()));
        p.put("rdma.fetch.enabled", "true");
        p.put("rdma.exporter.address", address(exporter));
        p.put("rdma.provider", "tcp");
        p.putAll(extra);
        return RdmaConsumerFactory.create(p, null, null);
    }
}
