package io.rdma4j.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaFixtures.Seen;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static io.rdma4j.testsupport.kafka.KafkaFixtures.address;
import static io.rdma4j.testsupport.kafka.KafkaFixtures.awaitLeaders;
import static io.rdma4j.testsupport.kafka.KafkaFixtures.pollUntil;
import static io.rdma4j.testsupport.kafka.KafkaFixtures.value;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The RDMA consumer returns exactly what a plain KafkaConsumer returns, against a real 4.3.1 broker.
 */
public class RdmaKafkaConsumerTest {

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

    @Test
    void severalPartitionsAcrossSegmentRollsMatchPlainConsumer() throws Exception {
        String topic = topic(3, Map.of("segment.bytes", "1048576"));
        produce(topic, 6000, 1024, Map.of());
        assertSameAsPlain(topic, 3, 6000, Map.of());
        assertThat(exporter.remaps()).as("growing/rolled segments were re-registered").isPositive();
    }

    @Test
    void theExporterClosesIdleConsumersKeepsBusyOnesAndAClosedOneReconnectsAtItsNextFetch() throws Exception {
        String topic = topic(1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        produce(topic, 300, 100, Map.of());
        Map<String, Object> props = new HashMap<>(cluster.exporterProps("127.0.0.1:0"));
        // Keepalives 15 times as often as the limit: a loaded 2-core CI machine stalls a poll loop for hundreds of ms.
        props.put(ExporterConfig.CONNECTIONS_MAX_IDLE, "1500");
        try (LogExporter shortIdle = LogExporter.start(ExporterConfig.fromProperties(props));
             // Waiting for its exporter connection: the records after the reconnect are RDMA's too.
             Consumer<String, String> c = rdmaConsumer(KafkaFixtures.waitingForRdma(Map.of("rdma.exporter.address",
                     address(shortIdle.address()), RdmaConsumerConfig.KEEPALIVE, "100")))) {
            c.assign(List.of(tp));
            assertThat(pollUntil(c, 300)).hasSize(300);
            long busyUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(3000);
            while (System.nanoTime() < busyUntil) { // caught up: READs of the watermark only, and keepalives
                assertThat(c.poll(Duration.ofMillis(50)).count()).isZero();
            }
            assertThat(shortIdle.idleConnectionsClosed()).as("a polling consumer's keepalives keep it open").isZero();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (shortIdle.idleConnectionsClosed() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(100); // the consumer does not poll: no keepalive
            }
            assertThat(shortIdle.idleConnectionsClosed()).as("closed after 1,500 ms without a request").isEqualTo(1);
            long rdmaBefore = KafkaFixtures.rdmaRecords(c);
            produce(topic, 100, 100, Map.of());
            assertThat(pollUntil(c, 100)).hasSize(100);
            assertThat(KafkaFixtures.rdmaRecords(c) - rdmaBefore).as("read by RDMA again").isPositive();
            assertThat(reconnects(c)).as("the reconnect counted").isEqualTo(1.0);
        }
    }

    private static double reconnects(Consumer<?, ?> c) {
        return c.metrics().entrySet().stream().filter(e -> e.getKey().name().equals("exporter-reconnects-total"))
                .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue()).sum();
    }

    @ParameterizedTest
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void everyCompressionCodecMatchesPlainConsumerInBothIsolationLevels(String codec) throws Exception {
        String topic = topic(2, Map.of());
        produce(topic, 3000, 200, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, "5"));
        assertSameAsPlain("codec " + codec, topic, 2, 3000, Map.of());
        assertSameAsPlain("codec " + codec, topic, 2, 3000, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
    }

    /**
     * Fetches of 8 KiB and polls of 15 records: fetches are served by the READ issued when the one before used up
     * its bytes, or by the bytes and records a poll before stopped in; decoded ahead or on the poll thread.
     */
    @ParameterizedTest(name = "decode ahead {0}")
    @ValueSource(booleans = {true, false})
    void smallFetchesReadAheadAndResumeInsideBatchesMatchPlainConsumer(boolean decodeAhead) throws Exception {
        String topic = topic(2, Map.of());
        produce(topic, 3000, 200, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4", ProducerConfig.LINGER_MS_CONFIG, "5"));
        Map<String, Object> small = Map.of(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "8192",
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "15");
        List<Seen> plain = consume(plainConsumer(small), topic, 2, 3000);
        for (String isolation : List.of("read_uncommitted", "read_committed")) {
            Map<String, Object> extra = new HashMap<>(small);
            extra.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
            extra.put("rdma.fetch.decode.ahead", decodeAhead);
            try (Consumer<String, String> c = rdmaOnly(extra)) {
                List<Seen> got = readAll(c, topic, 2, 3000);
                assertThat(got).as(isolation).isEqualTo(plain);
                assertEveryRecordByRdma(c, got, "small fetches, decode ahead " + decodeAhead + ", " + isolation);
            }
        }
    }

    /** fetch.max.bytes bounds what is held read ahead or left over across partitions, as it bounds KafkaConsumer's fetch. */
    @Test
    void whatIsHeldAheadStaysWithinFetchMaxBytes() throws Exception {
        String topic = topic(4, Map.of());
        produce(topic, 4000, 200, Map.of());
        Map<String, Object> bounded = Map.of(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "8192",
                ConsumerConfig.FETCH_MAX_BYTES_CONFIG, "20000", ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "15");
        List<Seen> plain = consume(plainConsumer(bounded), topic, 4, 4000);
        try (Consumer<String, String> c = rdmaOnly(bounded)) {
            RdmaKafkaConsumer<String, String> r = (RdmaKafkaConsumer<String, String>) c;
            java.util.concurrent.atomic.AtomicLong most = new java.util.concurrent.atomic.AtomicLong();
            List<Seen> got = readAll(c, topic, 4, 4000, () -> {
                most.accumulateAndGet(r.fetchBytesAhead(), Math::max);
                assertThat(r.fetchBytesAhead()).as("bytes held ahead after a poll").isLessThanOrEqualTo(20000);
            });
            assertThat(most.get()).as("something was held ahead at all").isPositive();
            assertThat(got).isEqualTo(plain);
            assertEveryRecordByRdma(c, got, "fetch.max.bytes 20000 over 4 partitions of 8 KiB fetches");
        }
    }

    @Test
    void pollsTakeTurnsAndWhatWasReadAheadGoesBackWithItsPartition() throws Exception {
        String topic = topic(2, Map.of());
        produce(topic, 3000, 200, Map.of());
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (Consumer<String, String> c = rdmaOnly(Map.of(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "8192",
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "15"))) {
            RdmaKafkaConsumer<String, String> r = (RdmaKafkaConsumer<String, String>) c;
            c.assign(List.of(p0, p1));
            c.seekToBeginning(List.of(p0, p1));
            java.util.Set<Integer> served = new java.util.TreeSet<>();
            for (int poll = 0; poll < 4; poll++) {
                c.poll(Duration.ofMillis(500)).forEach(rec -> served.add(rec.partition()));
            }
            // Both partitions hold 1500 records: without turns, every poll of 15 would go to the first one.
            assertThat(served).as("partitions served by the first four polls of 15 records").containsExactly(0, 1);
            assertThat(KafkaFixtures.rdmaRecords(r)).as("records by RDMA").isPositive();
            assertThat(r.fetchBuffersHeld()).as("one range read ahead or left over per partition").isEqualTo(2);

            c.assign(List.of(p0));
            c.poll(Duration.ofMillis(100));
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (r.fetchBuffersHeld() > 1 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertThat(r.fetchBuffersHeld()).as("the unassigned partition's range went back to the pool").isLessThanOrEqualTo(1);
        }
    }

    @Test
    void retainedLogAfterRetentionDeletedSegmentsMatchesPlainConsumerInBothIsolationLevels() throws Exception {
        String topic = topic(1, Map.of("segment.bytes", "1048576"));
        produce(topic, 6000, 1024, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        long end = admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest())).partitionResult(tp).get().offset();
        // Retention keeps about 2 of the ~6 segments.
        admin.incrementalAlterConfigs(Map.of(new org.apache.kafka.common.config.ConfigResource(
                org.apache.kafka.common.config.ConfigResource.Type.TOPIC, topic), List.of(new org.apache.kafka.clients.admin.AlterConfigOp(
                new org.apache.kafka.clients.admin.ConfigEntry("retention.bytes", "2097152"),
                org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET)))).all().get();
        long logStart = awaitLogStartAbove(tp, 0);
        awaitExportedLogStart(tp, logStart);
        int retained = (int) (end - logStart);
        String kind = "retention deleted offsets below " + logStart;
        assertSameAsPlain(kind, topic, 1, retained, Map.of());
        assertSameAsPlain(kind, topic, 1, retained, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
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
        // read_committed: aborted transactions skipped, all by RDMA too.
        assertSameAsPlain(topic, 1, 350, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
    }

    /** Two transactional producers (A aborts every third round, B every other) and a plain one, all into every partition. */
    private static final int ROUNDS = 6;
    private static final int PER_TRANSACTION_HALF = 30;
    private static final int PLAIN_IN_TRANSACTIONS = 20;
    private static final int PLAIN_BETWEEN_MARKERS = 9;

    private static boolean abortsA(int round) {
        return round % 3 == 1;
    }

    private static boolean abortsB(int round) {
        return round % 2 == 0;
    }

    @Test
    void transactionsSpanningSegmentRollsWithPlainWritesMatchKafkaConsumerInBothIsolationLevels() throws Exception {
        int partitions = 3;
        // segment.ms rolls a partition's segment at its first append 300 ms after the segment began, so each
        // transaction, written in two halves 350 ms apart, spans a roll in every partition.
        String topic = topic(partitions, Map.of("segment.ms", "300"));
        try (Producer<String, String> a = new KafkaProducer<>(producerProps(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "a-" + topic)));
             Producer<String, String> b = new KafkaProducer<>(producerProps(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "b-" + topic)));
             Producer<String, String> plain = new KafkaProducer<>(producerProps(Map.of()))) {
            a.initTransactions();
            b.initTransactions();
            for (int round = 0; round < ROUNDS; round++) {
                a.beginTransaction();
                b.beginTransaction();
                for (int half = 0; half < 2; half++) {
                    sendSpread(a, topic, partitions, "a" + round + "-" + half, PER_TRANSACTION_HALF);
                    sendSpread(plain, topic, partitions, "p" + round + "-" + half, PLAIN_IN_TRANSACTIONS);
                    sendSpread(b, topic, partitions, "b" + round + "-" + half, PER_TRANSACTION_HALF);
                    // flushed, so aborted records reach the log (abort drops unsent ones)
                    a.flush();
                    plain.flush();
                    b.flush();
                    if (half == 0) {
                        Thread.sleep(350);
                    }
                }
                if (abortsA(round)) {
                    a.abortTransaction();
                } else {
                    a.commitTransaction();
                }
                sendSpread(plain, topic, partitions, "p" + round + "-between", PLAIN_BETWEEN_MARKERS);
                plain.flush();
                if (abortsB(round)) {
                    b.abortTransaction();
                } else {
                    b.commitTransaction();
                }
            }
        }
        int all = ROUNDS * (4 * PER_TRANSACTION_HALF + 2 * PLAIN_IN_TRANSACTIONS + PLAIN_BETWEEN_MARKERS);
        int abortedRounds = (int) java.util.stream.IntStream.range(0, ROUNDS).filter(RdmaKafkaConsumerTest::abortsA).count()
                + (int) java.util.stream.IntStream.range(0, ROUNDS).filter(RdmaKafkaConsumerTest::abortsB).count();
        int committed = all - abortedRounds * 2 * PER_TRANSACTION_HALF;
        assertThat(abortedTransactionsSpanningRolls(topic, partitions)).as("aborted transactions that began in an earlier segment")
                .isPositive();
        for (int p = 0; p < partitions; p++) {
            TopicPartition tp = new TopicPartition(topic, p);
            long end = admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest())).partitionResult(tp).get().offset();
            awaitExported(tp, end);
        }

        Map<String, Object> uncommitted = Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        List<Seen> plainUncommitted = consume(plainConsumer(uncommitted), topic, partitions, all);
        long asked = exporter.abortedTransactionRequests();
        try (Consumer<String, String> c = rdmaOnly(uncommitted)) {
            assertThat(readAll(c, topic, partitions, all)).isEqualTo(plainUncommitted);
            assertEveryRecordByRdma(c, plainUncommitted, "transactional topic, read_uncommitted");
        }
        assertThat(exporter.abortedTransactionRequests()).as("read_uncommitted never asks for aborted transactions").isEqualTo(asked);
        assertThat(plainUncommitted).extracting(Seen::value).anyMatch(v -> v.startsWith("a1-")).anyMatch(v -> v.startsWith("b0-"));

        Map<String, Object> readCommitted = Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        List<Seen> plainCommitted = consume(plainConsumer(readCommitted), topic, partitions, committed);
        try (Consumer<String, String> c = rdmaOnly(readCommitted)) {
            assertThat(readAll(c, topic, partitions, committed)).isEqualTo(plainCommitted);
            assertEveryRecordByRdma(c, plainCommitted, "transactional topic, read_committed");
        }
        assertThat(exporter.abortedTransactionRequests()).as("read_committed asked for the aborted transactions").isGreaterThan(asked);
        assertThat(plainCommitted).extracting(Seen::value)
                .noneMatch(v -> v.startsWith("a1-") || v.startsWith("a4-") || v.startsWith("b0-") || v.startsWith("b2-"))
                .anyMatch(v -> v.startsWith("a0-")).anyMatch(v -> v.startsWith("b1-")).anyMatch(v -> v.startsWith("p1-"));
    }

    private static void sendSpread(Producer<String, String> producer, String topic, int partitions, String prefix, int count) {
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, i % partitions, prefix + "-k" + i, prefix + "-" + value(i, 100)));
        }
    }

    /** Aborted transactions, in the partitions' transaction indexes, whose first offset lies in an earlier segment than their marker. */
    private static long abortedTransactionsSpanningRolls(String topic, int partitions) throws Exception {
        long spanning = 0;
        for (int p = 0; p < partitions; p++) {
            java.nio.file.Path dir = java.nio.file.Path.of(cluster.logDirs().split(",")[0], topic + "-" + p);
            try (var files = Files.list(dir)) {
                for (java.nio.file.Path index : files.filter(f -> f.getFileName().toString().endsWith(".txnindex")).toList()) {
                    long base = Long.parseLong(index.getFileName().toString().substring(0, 20));
                    java.nio.ByteBuffer entries = java.nio.ByteBuffer.wrap(Files.readAllBytes(index));
                    while (entries.remaining() >= io.rdma4j.kafka.protocol.TransactionIndexEntry.SIZE) {
                        if (io.rdma4j.kafka.protocol.TransactionIndexEntry.read(entries, base).firstOffset() < base) {
                            spanning++;
                        }
                    }
                }
            }
        }
        return spanning;
    }

    @Test
    void readCommittedStopsAtTheLastStableOffsetOfAnOpenTransaction() throws Exception {
        String topic = topic(1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        produce(topic, 50, 100, Map.of()); // offsets 0-49
        Map<String, Object> readCommitted = Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (Producer<String, String> open = new KafkaProducer<>(producerProps(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "open-" + topic)));
             Consumer<String, String> plain = plainConsumer(readCommitted);
             Consumer<String, String> c = rdmaOnly(readCommitted)) {
            open.initTransactions();
            open.beginTransaction();
            for (int i = 0; i < 30; i++) {
                open.send(new ProducerRecord<>(topic, 0, "open" + i, "open-" + i));
            }
            open.flush(); // offsets 50-79: the last stable offset stays at 50 while this is open
            produce(topic, 40, 100, Map.of()); // offsets 80-119, exported (produce waits for it) but not yet stable
            for (Consumer<String, String> consumer : List.of(plain, c)) {
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
            }
            List<Seen> plainGot = pollUntil(plain, 50);
            List<Seen> got = pollUntil(c, 50);
            assertThat(got).isEqualTo(plainGot);
            assertThat(c.position(tp)).as("RDMA stops at the last stable offset").isEqualTo(plain.position(tp)).isEqualTo(50);
            open.abortTransaction();
            plainGot.addAll(pollUntil(plain, 40));
            got.addAll(pollUntil(c, 40));
            assertThat(got).isEqualTo(plainGot);
            assertThat(got).extracting(Seen::offset).containsExactlyElementsOf(java.util.stream.LongStream.concat(
                    java.util.stream.LongStream.range(0, 50), java.util.stream.LongStream.range(80, 120)).boxed().toList());
            assertEveryRecordByRdma(c, got, "open transaction, read_committed");
        }
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
    void deserializerFailureIsARecordDeserializationExceptionAtThatRecordAsInKafkaConsumer() throws Exception {
        String topic = topic(1, Map.of());
        produce(topic, 300, 50, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> poisoned = Map.of(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, PoisonDeserializer.class);
        List<Seen> plain = consumeAcrossPoison(plainConsumer(poisoned), tp);
        try (Consumer<String, String> c = rdmaOnly(poisoned)) {
            List<Seen> got = consumeAcrossPoison(c, tp);
            assertThat(got).isEqualTo(plain);
            assertThat(KafkaFixtures.rdmaRecords(c)).as("records came by RDMA").isEqualTo(299);
        }
        assertThat(plain).hasSize(299);
    }

    /** Consumes up to the poison record, checks the exception and the position, seeks past it, consumes the rest. */
    private static List<Seen> consumeAcrossPoison(Consumer<String, String> c, TopicPartition tp) {
        try (c) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            List<Seen> out = new ArrayList<>();
            org.apache.kafka.common.errors.RecordDeserializationException failure = null;
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (failure == null && System.nanoTime() < deadline) {
                try {
                    c.poll(Duration.ofMillis(200)).forEach(r -> out.add(Seen.of(r)));
                } catch (org.apache.kafka.common.errors.RecordDeserializationException e) {
                    failure = e;
                }
            }
            assertThat(failure).as("the poison record's failure").isNotNull();
            assertThat(failure.offset()).isEqualTo(PoisonDeserializer.POISON_OFFSET);
            assertThat(failure.topicPartition()).isEqualTo(tp);
            assertThat(failure.origin()).isEqualTo(org.apache.kafka.common.errors.RecordDeserializationException.DeserializationExceptionOrigin.VALUE);
            assertThat(failure.getCause()).hasMessageContaining("poison");
            assertThat(out).extracting(Seen::offset).containsExactlyElementsOf(
                    java.util.stream.LongStream.range(0, PoisonDeserializer.POISON_OFFSET).boxed().toList());
            assertThat(c.position(tp)).as("the position stays on the record that failed").isEqualTo(PoisonDeserializer.POISON_OFFSET);
            c.seek(tp, PoisonDeserializer.POISON_OFFSET + 1);
            out.addAll(pollUntil(c, 300 - (int) PoisonDeserializer.POISON_OFFSET - 1));
            return out;
        }
    }

    /** Fails on one record's value, as a deserializer meeting bytes it cannot parse does. */
    public static final class PoisonDeserializer implements org.apache.kafka.common.serialization.Deserializer<String> {
        static final long POISON_OFFSET = 150;

        @Override
        public String deserialize(String topic, byte[] data) {
            String s = new String(data, StandardCharsets.UTF_8);
            if (s.startsWith("v" + POISON_OFFSET + "-")) {
                throw new org.apache.kafka.common.errors.SerializationException("poison value at " + POISON_OFFSET);
            }
            return s;
        }
    }

    private void awaitExported(TopicPartition tp, long highWatermark) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (exporter.exportedHighWatermark(tp) < highWatermark) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("exporter did not serve " + tp + " up to offset " + highWatermark + " within 30 s (serves "
                        + exporter.exportedHighWatermark(tp) + ")");
            }
            Thread.sleep(20);
        }
    }

    /** In the first batch (read by the first, synchronous fetch), or deep in the segment, where a read-ahead reaches it. */
    @ParameterizedTest(name = "flipped byte {0}, decode ahead {1}")
    @CsvSource({"80, true", "60000, true", "60000, false"})
    void corruptBatchIsDetectedByCrcAndNeverReturned(int flippedByte, boolean decodeAhead) throws Exception {
        String topic = topic(1, Map.of());
        produce(topic, 1000, 100, Map.of());
        // An exporter that exports a copy of every segment with one byte flipped inside the first batch's records.
        try (LogExporter tampering = LogExporter.start(ExporterConfig.fromProperties(cluster.exporterProps("127.0.0.1:0")),
                (transport, file, size, arena) -> {
                    MemorySegment copy = arena.allocate(size, 8);
                    copy.copyFrom(MemorySegment.ofArray(Files.readAllBytes(file)).asSlice(0, size));
                    if (file.getParent().getFileName().toString().startsWith(topic) && size > flippedByte + 100) {
                        copy.set(java.lang.foreign.ValueLayout.JAVA_BYTE, flippedByte,
                                (byte) (copy.get(java.lang.foreign.ValueLayout.JAVA_BYTE, flippedByte) ^ 0x5a));
                    }
                    return transport.register(copy, io.rdma4j.core.Access.remoteRead());
                })) {
            List<Seen> plain = consume(plainConsumer(Map.of()), topic, 1, 1000);
            try (Consumer<String, String> c = rdmaOnly(Map.of("rdma.exporter.address", address(tampering.address()),
                    ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "16384", "rdma.fetch.decode.ahead", decodeAhead))) {
                List<Seen> got = consume(c, topic, 1, 1000);
                RdmaKafkaConsumer<String, String> r = (RdmaKafkaConsumer<String, String>) c;
                assertThat(KafkaFixtures.crcFailures(r)).as("the flipped byte was caught by the CRC").isPositive();
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
    void aNewConsumerReadsThroughKafkaWhileItsExporterIsSlowToAcceptThenByRdmaFromWhereKafkaLeftOff() throws Exception {
        String topic = topic(2, Map.of());
        produce(topic, 3000, 100, Map.of());
        List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        // The connect timeout is far beyond the deadlines below: a poll that waited for the connection would miss them.
        try (HeldExporter held = new HeldExporter(exporter.address());
             Consumer<String, String> c = rdmaConsumer(Map.of("rdma.exporter.address", held.address(), "rdma.connect-timeout", "90s",
                     ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100"))) {
            c.assign(tps);
            c.seekToBeginning(tps);
            FetchFigures.Paths paths = new FetchFigures.Paths(c);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (paths.records() == 0) {
                assertThat(System.nanoTime()).as("records through Kafka within 30 s while the exporter holds the connection")
                        .isLessThan(deadline);
                paths.poll(Duration.ofMillis(100));
            }
            assertThat(held.accepted()).as("connections the consumer opened to the exporter meanwhile").isPositive();
            assertThat(KafkaFixtures.rdmaRecords(c)).as("records by RDMA before the exporter took the connection").isZero();
            assertThat(FetchFigures.fallbacks(c)).containsOnlyKeys("exporter-connecting");

            held.release();
            // Not polled meanwhile: Kafka's fetch already holds most of the records and would return them faster than
            // the connection is made; once it is, RDMA takes each partition over at its position.
            FetchFigures.await(() -> FetchFigures.connections(c) > 0, "the connection to the exporter");
            // The transport counts a connection open a moment before the consumer's setup of it is done; a busy machine
            // may make that moment long enough for Kafka's fetch to return a whole partition.
            FetchFigures.await(() -> !((RdmaKafkaConsumer<String, String>) c).settingUpExporters(), "the consumer's setup of it");
            deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (paths.records() < 3000) {
                assertThat(System.nanoTime()).as("3000 records within 60 s, %d so far", paths.records()).isLessThan(deadline);
                paths.poll(Duration.ofMillis(100));
            }
            assertThat(paths.poll(Duration.ofMillis(300))).as("records beyond the end").isZero();
            paths.assertKafkaThenRdma(c.endOffsets(tps));
            long byKafka = 3000 - KafkaFixtures.rdmaRecords(c);
            System.out.printf("exporter slow to accept: %d records through Kafka, then %d by RDMA; polls per partition %s%n",
                    byKafka, KafkaFixtures.rdmaRecords(c), paths.order());
            assertThat(FetchFigures.fallbacks(c)).as("no other fallback").containsOnlyKeys("exporter-connecting");
            assertThat(c.position(tps.get(0)) + c.position(tps.get(1))).isEqualTo(3000);
        }
    }

    @Test
    void withASetupWaitAPartitionWaitsForItsExporterInsteadOfComingThroughKafka() throws Exception {
        String topic = topic(1, Map.of());
        produce(topic, 500, 100, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        try (HeldExporter held = new HeldExporter(exporter.address());
             Consumer<String, String> c = rdmaConsumer(Map.of("rdma.exporter.address", held.address(), "rdma.connect-timeout", "90s",
                     RdmaConsumerConfig.SETUP_WAIT, "60000"))) {
            c.assign(List.of(tp));
            long until = System.nanoTime() + Duration.ofSeconds(2).toNanos();
            while (System.nanoTime() < until) {
                assertThat(c.poll(Duration.ofMillis(100)).count()).as("records while the exporter holds the connection").isZero();
            }
            assertThat(held.accepted()).isPositive();
            held.release();
            assertThat(pollUntil(c, 500)).extracting(Seen::offset).containsExactlyElementsOf(
                    java.util.stream.LongStream.range(0, 500).boxed().toList());
            assertThat(KafkaFixtures.rdmaRecords(c)).as("all by RDMA").isEqualTo(500);
            assertThat(FetchFigures.fallbacks(c)).containsOnlyKeys("exporter-connecting");
        }
    }

    @Test
    void aConsumerClosesAtOnceWhileItsExporterConnectionIsStillBeingSetUp() throws Exception {
        String topic = topic(1, Map.of());
        produce(topic, 100, 100, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        try (HeldExporter held = new HeldExporter(exporter.address())) {
            Consumer<String, String> c = rdmaConsumer(Map.of("rdma.exporter.address", held.address(), "rdma.connect-timeout", "90s"));
            try {
                c.assign(List.of(tp));
                List<Seen> got = pollUntil(c, 100);
                assertThat(got).as("through Kafka, the exporter holding the connection").hasSize(100);
                assertThat(held.accepted()).isPositive();
                assertThat(KafkaFixtures.rdmaRecords(c)).isZero();
            } finally {
                long start = System.nanoTime();
                c.close();
                assertThat(Duration.ofNanos(System.nanoTime() - start)).as("close, with the connect under way for up to 90 s")
                        .isLessThan(Duration.ofSeconds(20));
            }
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
    void rdmaReadsLogOneLinePerPartitionAndNoSeeksWhileAutoCommitKeepsThePositions() throws Exception {
        String topic = topic(2, Map.of());
        produce(topic, 4000, 100, Map.of());
        String group = "g-" + topic;
        Map<String, Object> autoCommit = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true",
                ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "100", ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "16384",
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        Map<TopicPartition, Long> ends = new HashMap<>();
        String log = RdmaFetchMetricsTest.capturingStandardError(() -> {
            try (Consumer<String, String> c = rdmaOnly(autoCommit)) {
                c.subscribe(List.of(topic));
                List<Seen> got = pollUntil(c, 4000);
                assertEveryRecordByRdma(c, got, "auto-commit");
                ends.putAll(c.endOffsets(List.of(p0, p1)));
                assertThat(c.position(p0)).isEqualTo(ends.get(p0));
                assertThat(c.position(p1)).isEqualTo(ends.get(p1));
                // Auto-commit commits what RDMA read, on the interval, without being asked.
                long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
                while (!committedUpTo(c, ends) && System.nanoTime() < deadline) {
                    c.poll(Duration.ofMillis(100));
                }
                assertThat(committedUpTo(c, ends)).as("auto-committed up to %s", ends).isTrue();
            }
        });
        // Dozens of RDMA fetches, and the internal KafkaConsumer seeked for none of them.
        assertThat(log.lines().filter(l -> l.contains("Seeking to offset"))).as("KafkaConsumer's INFO line per seek in:%n%s", log).isEmpty();
        for (TopicPartition tp : List.of(p0, p1)) {
            assertThat(log.lines().filter(l -> l.contains(" INFO ") && l.contains(" " + tp + " "))).as("INFO lines of %s", tp)
                    .satisfiesExactly(
                            start -> assertThat(start).contains(tp + " is read by RDMA from the log exporter at /127.0.0.1:").endsWith(" over tcp"),
                            stop -> assertThat(stop).contains(tp + " stops being read by RDMA: "));
        }
        // More records, read by a consumer that closes before the interval is up: close commits them.
        produce(topic, 400, 100, Map.of());
        Map<String, Object> slow = new HashMap<>(autoCommit);
        slow.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "600000");
        try (Consumer<String, String> c = rdmaConsumer(slow)) {
            c.subscribe(List.of(topic));
            pollUntil(c, 400); // exactly the new ones: the first consumer's close committed the rest
        }
        try (Consumer<String, String> c = plainConsumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
            assertThat(committedUpTo(c, c.endOffsets(List.of(p0, p1)))).as("committed as the consumer closed").isTrue();
        }
    }

    private static boolean committedUpTo(Consumer<?, ?> c, Map<TopicPartition, Long> ends) {
        var committed = c.committed(ends.keySet());
        return ends.entrySet().stream().allMatch(e -> committed.get(e.getKey()) != null
                && committed.get(e.getKey()).offset() == e.getValue());
    }

    @Test
    void factoryReturnsPlainKafkaConsumerWhenDisabled() {
        Map<String, Object> p = new HashMap<>(consumerProps(Map.of()));
        p.put("rdma.fetch.enabled", "false");
        try (Consumer<String, String> c = RdmaConsumerFactory.create(p, new StringDeserializer(), new StringDeserializer())) {
            assertThat(c).isInstanceOf(KafkaConsumer.class);
        }
    }

    /** With the classic rebalance protocol, and with the consumer protocol of KIP-848 (assignments from the broker). */
    @ParameterizedTest
    @ValueSource(strings = {"classic", "consumer"})
    void secondGroupMemberJoiningMidStreamLosesNothing(String groupProtocol) throws Exception {
        String topic = topic(4, Map.of());
        produce(topic, 4000, 100, Map.of());
        String group = "g-" + topic;
        Map<String, Object> member = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100",
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
        List<Seen> got = new ArrayList<>();
        // Records whose commit failed (a rebalance in progress): a KafkaConsumer may deliver exactly these twice.
        java.util.Set<String> uncommitted = new java.util.HashSet<>();
        try (Consumer<String, String> a = rdmaOnly(member); Consumer<String, String> b = rdmaOnly(member)) {
            a.subscribe(List.of(topic));
            while (got.size() < 1000) {
                pollAndCommit(a, got, uncommitted);
            }
            assertThat(a.assignment()).as("the first member owns every partition").hasSize(4);
            b.subscribe(List.of(topic)); // joins mid-stream: the group rebalances
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (b.assignment().isEmpty() && System.nanoTime() < deadline) {
                pollAndCommit(a, got, uncommitted);
                pollAndCommit(b, got, uncommitted);
            }
            assertThat(b.assignment()).as("the joiner got partitions in the rebalance").isNotEmpty();
            // Produced after the hand-over, so the joiner has records of its own to read whatever the first member drained.
            produce(topic, 2000, 100, Map.of());
            while (distinct(got) < 6000 && System.nanoTime() < deadline) {
                pollAndCommit(a, got, uncommitted);
                pollAndCommit(b, got, uncommitted);
            }
            pollAndCommit(a, got, uncommitted);
            pollAndCommit(b, got, uncommitted);
            assertThat(a.assignment()).as("partitions split after the rebalance").hasSizeBetween(1, 3);
            assertThat(b.assignment()).hasSize(4 - a.assignment().size());
            assertRdmaRead(a);
            assertRdmaRead(b);
            assertThat(KafkaFixtures.rdmaRecords(b)).as("the joiner read by RDMA").isPositive();
        }
        List<Seen> plain = consume(plainConsumer(Map.of()), topic, 4, 6000);
        assertThat(new java.util.HashSet<>(got)).as("union of both members equals the topic").isEqualTo(new java.util.HashSet<>(plain));
        Map<String, Integer> times = new HashMap<>();
        got.forEach(s -> times.merge(s.partition() + "@" + s.offset(), 1, Integer::sum));
        times.forEach((k, n) -> {
            if (n > 1) {
                assertThat(uncommitted).as("duplicate " + k + " only where a commit failed").contains(k);
            }
        });
        for (int p = 0; p < 4; p++) {
            int part = p;
            List<Long> offsets = got.stream().filter(s -> s.partition() == part).map(Seen::offset).toList();
            for (int i = 1; i < offsets.size(); i++) {
                if (offsets.get(i) <= offsets.get(i - 1)) {
                    assertThat(uncommitted).as("offsets go back only to redeliver uncommitted records")
                            .contains(part + "@" + offsets.get(i));
                }
            }
        }
    }

    private static void pollAndCommit(Consumer<String, String> c, List<Seen> sink, java.util.Set<String> uncommitted) {
        List<Seen> batch = new ArrayList<>();
        c.poll(Duration.ofMillis(100)).forEach(r -> batch.add(Seen.of(r)));
        sink.addAll(batch);
        try {
            c.commitSync();
        } catch (org.apache.kafka.common.errors.RebalanceInProgressException
                 | org.apache.kafka.clients.consumer.CommitFailedException e) {
            batch.forEach(s -> uncommitted.add(s.partition() + "@" + s.offset()));
        }
    }

    private static long distinct(List<Seen> seen) {
        return seen.stream().map(s -> s.partition() + "@" + s.offset()).distinct().count();
    }

    @Test
    void retentionDeletingSegmentsWhileConsuming() throws Exception {
        String topic = topic(1, Map.of("segment.bytes", "1048576"));
        produce(topic, 6000, 1024, Map.of());
        List<Seen> reference = consume(plainConsumer(Map.of()), topic, 1, 6000);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Consumer<String, String> c = rdmaConsumer(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "300",
                "rdma.fetch.fallback.backoff.ms", "200"));
             Consumer<String, String> plain = plainConsumer(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "300"))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            plain.assign(List.of(tp));
            plain.seekToBeginning(List.of(tp));
            List<Seen> got = pollAtLeast(c, 1500);
            List<Seen> plainGot = pollAtLeast(plain, 1500);
            long rdmaStop = c.position(tp);
            long plainStop = plain.position(tp);
            long readBefore = ((RdmaKafkaConsumer<String, String>) c).transportMetrics().snapshot(OperationType.READ).count();
            // Retention now keeps about 2 of the ~6 segments: the one both consumers are reading goes.
            admin.incrementalAlterConfigs(Map.of(new org.apache.kafka.common.config.ConfigResource(
                    org.apache.kafka.common.config.ConfigResource.Type.TOPIC, topic), List.of(new org.apache.kafka.clients.admin.AlterConfigOp(
                    new org.apache.kafka.clients.admin.ConfigEntry("retention.bytes", "2097152"),
                    org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET)))).all().get();
            long logStart = awaitLogStartAbove(tp, Math.max(rdmaStop, plainStop));
            got.addAll(pollToEnd(c, tp, 6000));
            plainGot.addAll(pollToEnd(plain, tp, 6000));
            // Each consumer returns the log up to some offset (a KafkaConsumer may return records it prefetched
            // before the deletion), then jumps (auto.offset.reset=earliest) and returns every retained record.
            assertPrefixThenRetainedTail(plainGot, reference, plainStop, logStart);
            assertPrefixThenRetainedTail(got, reference, rdmaStop, logStart);
            assertThat(((RdmaKafkaConsumer<String, String>) c).transportMetrics().snapshot(OperationType.READ).count())
                    .as("RDMA reads went on after the deletion").isGreaterThan(readBefore);
        }
    }

    private static void assertPrefixThenRetainedTail(List<Seen> got, List<Seen> reference, long readBefore, long logStart) {
        for (int i = 0; i < got.size(); i++) {
            Seen s = got.get(i);
            assertThat(s).as("record at offset " + s.offset()).isEqualTo(reference.get((int) s.offset()));
            if (i > 0) {
                long prev = got.get(i - 1).offset();
                assertThat(s.offset()).as("offsets increase; a gap only up to the new log start").isGreaterThan(prev)
                        .satisfiesAnyOf(o -> assertThat(o).isEqualTo(prev + 1), o -> assertThat(o).isLessThanOrEqualTo(logStart));
            }
        }
        assertThat(got.getFirst().offset()).isZero();
        assertThat(got.stream().filter(s -> s.offset() < readBefore).count()).as("nothing lost before the deletion").isEqualTo(readBefore);
        assertThat(got.getLast().offset()).isEqualTo(reference.getLast().offset());
    }

    /** Polls until the position reaches {@code end}. */
    static List<Seen> pollToEnd(Consumer<String, String> c, TopicPartition tp, long end) {
        List<Seen> out = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (c.position(tp) < end && System.nanoTime() < deadline) {
            c.poll(Duration.ofMillis(200)).forEach(r -> out.add(Seen.of(r)));
        }
        assertThat(c.position(tp)).as("position reached the end").isEqualTo(end);
        return out;
    }

    private void awaitExportedLogStart(TopicPartition tp, long logStart) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (exporter.exportedLogStart(tp) < logStart) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("exporter did not serve " + tp + " from log start " + logStart + " within 30 s");
            }
            Thread.sleep(20);
        }
    }

    private long awaitLogStartAbove(TopicPartition tp, long offset) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (System.nanoTime() < deadline) {
            long start = admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.earliest())).partitionResult(tp).get().offset();
            if (start > offset) {
                Thread.sleep(1500); // past file.delete.delay.ms: the segment files are gone too
                return start;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("retention never deleted the segment holding offset " + offset);
    }

    @Test
    void compactedTopicMatchesPlainConsumerAfterCompaction() throws Exception {
        String topic = topic(1, Map.of("cleanup.policy", "compact", "segment.ms", "200", "min.cleanable.dirty.ratio", "0.01",
                "delete.retention.ms", "100", "min.compaction.lag.ms", "0"));
        TopicPartition tp = new TopicPartition(topic, 0);
        // 50 keys written 5 times a round; segment.ms rolls a segment per round, so the cleaner has work.
        for (int round = 0; round < 8; round++) {
            produceKeys(topic, 50, 5, round);
            Thread.sleep(250);
        }
        List<Seen> compacted = awaitCompaction(topic, 2000);
        long firstPass = cleanedUpTo(tp);
        assertThat(firstPass).as("the cleaner's first pass cleaned the log up to").isPositive();
        // A fresh RDMA consumer over the compacted log (offset gaps, thinned batches) equals the plain consumer.
        try (Consumer<String, String> c = rdmaOnly(Map.of())) {
            assertThat(readAll(c, topic, 1, compacted.size())).isEqualTo(compacted);
            assertEveryRecordByRdma(c, compacted, "compacted topic after a cleaner pass, new consumer");
        }
        try (Consumer<String, String> c = rdmaOnly(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            assertThat(readAll(c, topic, 1, compacted.size())).isEqualTo(compacted);
            assertEveryRecordByRdma(c, compacted, "compacted topic after a cleaner pass, new read_committed consumer");
        }
        // Compaction while an RDMA consumer is mid-stream: its segments are replaced under it.
        try (Consumer<String, String> c = rdmaConsumer(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20"))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            List<Seen> got = pollAtLeast(c, 20);
            int readBefore = got.size();
            assertThat(got).isEqualTo(compacted.subList(0, readBefore));
            long position = c.position(tp);
            for (int round = 8; round < 12; round++) {
                produceKeys(topic, 50, 5, round);
                Thread.sleep(250);
            }
            produceKeys(topic, 50, 1, 99); // rolls the last segment of the rounds, so it is cleanable too
            List<Seen> after = awaitCompaction(topic, compacted.size() + 1050);
            assertThat(cleanedUpTo(tp)).as("the cleaner ran again, over the new rounds").isGreaterThan(firstPass);
            List<Seen> expectedRest = after.stream().filter(s -> s.offset() >= position).toList();
            got.addAll(pollUntil(c, expectedRest.size()));
            assertThat(got.subList(readBefore, got.size())).as("after compaction the RDMA consumer sees the compacted log")
                    .isEqualTo(expectedRest);
            assertByRdmaButWhileConnecting(c, got, "compacted topic, consumer reading across a second cleaner pass");
        }
    }

    @Test
    void consumerPollingWhileTheCleanerRunsKeepsReadingByRdma() throws Exception {
        String topic = topic(1, Map.of("cleanup.policy", "compact", "segment.ms", "200", "min.cleanable.dirty.ratio", "0.01",
                "delete.retention.ms", "100", "min.compaction.lag.ms", "0"));
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<Long, Seen> produced = new HashMap<>();
        java.util.Set<Long> passes = new java.util.TreeSet<>();
        List<Seen> got = new ArrayList<>();
        try (Consumer<String, String> c = rdmaConsumer(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20"))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            // The consumer polls all along but reads less than is written, so it falls behind into segments that
            // roll and that the cleaner replaces under it, pass after pass. Each round also writes a key of its own
            // and deletes the previous round's, so the cleaner has tombstones to delete once their time is up.
            for (int round = 0; round < 20 || passes.size() < 3; round++) {
                assertThat(round).as("rounds until the cleaner ran twice over what was written").isLessThan(60);
                produced.putAll(produceKeysRecording(topic, 50, 3, round));
                produced.putAll(produceRecording(topic, "gone" + round, "once"));
                if (round > 0) {
                    produced.putAll(produceRecording(topic, "gone" + (round - 1), null));
                } else {
                    // The first poll reads offset 0: until the exporter has published what was just written, the
                    // consumer would read it through Kafka, as designed, and the test is about what comes after.
                    awaitExported(tp, Collections.max(produced.keySet()) + 1);
                }
                long until = System.nanoTime() + Duration.ofMillis(250).toNanos();
                for (int poll = 0; poll < 3; poll++) {
                    c.poll(Duration.ofMillis(20)).forEach(r -> got.add(Seen.of(r)));
                }
                Thread.sleep(Math.max(0, (until - System.nanoTime()) / 1_000_000));
                passes.add(cleanedUpTo(tp));
            }
            produced.putAll(produceKeysRecording(topic, 50, 1, 999)); // rolls the last round's segment
            awaitCleanedPast(tp, c.position(tp)); // what is left to read is compacted, at least in part
            long end = admin.listOffsets(Map.of(tp, org.apache.kafka.clients.admin.OffsetSpec.latest())).partitionResult(tp).get().offset();
            awaitExported(tp, end);
            got.addAll(pollToEnd(c, tp, end));
            List<Seen> compacted = plainLogToEnd(tp);
            // What a consumer returns while the cleaner runs depends on when it reads; what must hold, as for a
            // KafkaConsumer: offsets only increase, every record is the one written at its offset, and every record
            // that survived compaction (so was in the log all along) was returned.
            long gaps = 0;
            for (int i = 1; i < got.size(); i++) {
                assertThat(got.get(i).offset()).as("offsets increase").isGreaterThan(got.get(i - 1).offset());
                gaps += got.get(i).offset() > got.get(i - 1).offset() + 1 ? 1 : 0;
            }
            for (Seen s : got) {
                assertThat(s).as("record at offset %d", s.offset()).isEqualTo(produced.get(s.offset()));
            }
            assertThat(got).as("every record that survived compaction").containsAll(compacted);
            assertThat(gaps).as("offset gaps the consumer read across").isPositive();
            assertThat(passes.stream().filter(o -> o > 0).count()).as("cleaner passes seen").isGreaterThanOrEqualTo(2);
            long tombstones = produced.values().stream().filter(s -> s.value() == null).count();
            long tombstonesLeft = compacted.stream().filter(s -> s.value() == null).count();
            assertThat(tombstonesLeft).as("tombstones the cleaner has not deleted").isLessThan(tombstones);
            System.out.println("cleaner passes ended at offsets " + passes + "; " + got.size() + " records read across "
                    + gaps + " offset gaps; " + (tombstones - tombstonesLeft) + " of " + tombstones + " tombstones deleted; "
                    + compacted.size() + " records in the compacted log");
            assertByRdmaButWhileConnecting(c, got, "compacted topic, consumer polling while the cleaner runs");
        }
    }

    /** The whole log of {@code tp} as a KafkaConsumer reads it, in one pass up to the end offset. */
    private List<Seen> plainLogToEnd(TopicPartition tp) {
        try (Consumer<String, String> plain = plainConsumer(Map.of())) {
            plain.assign(List.of(tp));
            plain.seekToBeginning(List.of(tp));
            return pollToEnd(plain, tp, plain.endOffsets(List.of(tp)).get(tp));
        }
    }

    private void awaitCleanedPast(TopicPartition tp, long offset) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (cleanedUpTo(tp) <= offset) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the cleaner never cleaned " + tp + " past offset " + offset);
            }
            Thread.sleep(100);
        }
    }

    /** Writes one record ({@code value} null: a tombstone) and returns it by its offset. */
    private Map<Long, Seen> produceRecording(String topic, String key, String value) throws Exception {
        try (Producer<String, String> p = new KafkaProducer<>(producerProps(Map.of()))) {
            var md = p.send(new ProducerRecord<>(topic, key, value)).get();
            return Map.of(md.offset(), new Seen(md.partition(), md.offset(), key, value, List.of(), md.timestamp()));
        }
    }

    /** Writes {@code times} values for each of {@code keys} keys and returns them by the offset the broker gave them. */
    private Map<Long, Seen> produceKeysRecording(String topic, int keys, int times, int round) throws Exception {
        Map<Long, Seen> out = new HashMap<>();
        try (Producer<String, String> p = new KafkaProducer<>(producerProps(Map.of()))) {
            List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> acks = new ArrayList<>();
            List<ProducerRecord<String, String>> sent = new ArrayList<>();
            for (int t = 0; t < times; t++) {
                for (int k = 0; k < keys; k++) {
                    ProducerRecord<String, String> r = new ProducerRecord<>(topic, "key" + k, "r" + round + "-t" + t + "-" + value(k, 100));
                    sent.add(r);
                    acks.add(p.send(r));
                }
            }
            for (int i = 0; i < acks.size(); i++) {
                var md = acks.get(i).get();
                out.put(md.offset(), new Seen(md.partition(), md.offset(), sent.get(i).key(), sent.get(i).value(), List.of(), md.timestamp()));
            }
        }
        return out;
    }

    /** Where the log cleaner's last pass over {@code tp} ended, from the broker's cleaner-offset-checkpoint; 0 before any. */
    private static long cleanedUpTo(TopicPartition tp) throws Exception {
        java.nio.file.Path checkpoint = java.nio.file.Path.of(cluster.logDirs().split(",")[0], "cleaner-offset-checkpoint");
        if (!Files.exists(checkpoint)) {
            return 0;
        }
        // version, entry count, then "topic partition offset" lines
        for (String line : Files.readAllLines(checkpoint)) {
            String[] fields = line.trim().split(" ");
            if (fields.length == 3 && fields[0].equals(tp.topic()) && fields[1].equals(String.valueOf(tp.partition()))) {
                return Long.parseLong(fields[2]);
            }
        }
        return 0;
    }

    private void produceKeys(String topic, int keys, int times, int round) throws Exception {
        List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> acks = new ArrayList<>();
        try (Producer<String, String> p = new KafkaProducer<>(producerProps(Map.of()))) {
            for (int t = 0; t < times; t++) {
                for (int k = 0; k < keys; k++) {
                    acks.add(p.send(new ProducerRecord<>(topic, "key" + k, "r" + round + "-t" + t + "-" + value(k, 100))));
                }
            }
        }
        for (var ack : acks) {
            ack.get();
        }
    }

    /** Waits until the cleaner has removed most superseded records and is done; returns the compacted log. */
    private List<Seen> awaitCompaction(String topic, int produced) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        int last = -1;
        while (System.nanoTime() < deadline) {
            int n = countRecords(topic);
            if (n < produced / 2 && n == last) {
                return consume(plainConsumer(Map.of()), topic, 1, n);
            }
            last = n;
            Thread.sleep(700);
        }
        throw new AssertionError("the log cleaner never compacted " + topic);
    }

    private int countRecords(String topic) {
        try (Consumer<String, String> c = plainConsumer(Map.of())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            int n = 0;
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (c.position(tp) < end && System.nanoTime() < deadline) {
                n += c.poll(Duration.ofMillis(200)).count();
            }
            return n;
        }
    }

    // ---- helpers ----

    /** Both consumers read the topic from the start: the same records, every one by RDMA (counted per partition). */
    private void assertSameAsPlain(String topic, int partitions, int expected, Map<String, Object> extra) {
        assertSameAsPlain(topic, topic, partitions, expected, extra);
    }

    /** {@code kind} names the topic's kind in the printed per-partition counts. */
    private void assertSameAsPlain(String kind, String topic, int partitions, int expected, Map<String, Object> extra) {
        List<Seen> plain = consume(plainConsumer(extra), topic, partitions, expected);
        try (Consumer<String, String> c = rdmaOnly(extra)) {
            List<Seen> got = readAll(c, topic, partitions, expected);
            assertThat(got).hasSize(plain.size()).isEqualTo(plain);
            assertEveryRecordByRdma(c, got, kind + ", " + extra.getOrDefault(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted"));
        }
        assertThat(plain).hasSize(expected);
    }

    static void assertRdmaRead(Consumer<String, String> c) {
        var read = ((RdmaKafkaConsumer<String, String>) c).transportMetrics().snapshot(OperationType.READ);
        assertThat(read.count()).as("RDMA READ operations").isPositive();
        assertThat(read.bytes()).as("RDMA READ bytes").isPositive();
    }

    /** All records of the topic, per partition in order, partitions in ascending order; closes the consumer. */
    private static List<Seen> consume(Consumer<String, String> c, String topic, int partitions, int expected) {
        try (c) {
            return readAll(c, topic, partitions, expected);
        }
    }

    /** All records of the topic, per partition in order, partitions in ascending order. */
    private static List<Seen> readAll(Consumer<String, String> c, String topic, int partitions, int expected) {
        return readAll(c, topic, partitions, expected, () -> { });
    }

    /** As {@link #readAll(Consumer, String, int, int)}, running {@code afterEachPoll} after every poll. */
    private static List<Seen> readAll(Consumer<String, String> c, String topic, int partitions, int expected, Runnable afterEachPoll) {
        List<TopicPartition> tps = java.util.stream.IntStream.range(0, partitions).mapToObj(p -> new TopicPartition(topic, p)).toList();
        c.assign(tps);
        c.seekToBeginning(tps);
        List<Seen> all = pollUntil(c, expected, afterEachPoll);
        List<Seen> sorted = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            int part = p;
            all.stream().filter(s -> s.partition() == part).forEach(sorted::add); // keeps per-partition order
        }
        return sorted;
    }

    /**
     * Every record {@code c} returned came by RDMA: its per-partition {@code records-rdma-total} equals the records
     * of that partition in {@code got}, and so does its total. Prints the counts under {@code label}.
     */
    static void assertEveryRecordByRdma(Consumer<String, String> c, List<Seen> got, String label) {
        assertByRdma(c, got, label, false);
    }

    /**
     * As {@link #assertEveryRecordByRdma}, but for the records Kafka's fetch returned while the consumer's exporter
     * connection was set up, or set up again after the exporter closed it (a replaced segment): it does not wait.
     */
    static void assertByRdmaButWhileConnecting(Consumer<String, String> c, List<Seen> got, String label) {
        assertByRdma(c, got, label, true);
    }

    private static void assertByRdma(Consumer<String, String> c, List<Seen> got, String label, boolean butWhileConnecting) {
        Map<Integer, Long> perPartition = new java.util.TreeMap<>();
        got.forEach(s -> perPartition.merge(s.partition(), 1L, Long::sum));
        String topic = c.assignment().iterator().next().topic();
        boolean connecting = butWhileConnecting && FetchFigures.fallbacks(c).containsKey("exporter-connecting");
        StringBuilder line = new StringBuilder("RDMA records, " + label + ":");
        for (var e : perPartition.entrySet()) {
            double rdma = FetchFigures.rdmaRecords(c, new TopicPartition(topic, e.getKey()));
            line.append(" partition ").append(e.getKey()).append(' ').append((long) rdma).append('/').append(e.getValue());
            if (!connecting) {
                assertThat(rdma).as("records-rdma-total of partition %d (%s)", e.getKey(), label).isEqualTo((double) e.getValue());
            }
        }
        long total = KafkaFixtures.rdmaRecords(c);
        System.out.println(line.append("; total ").append(total).append(" by RDMA of ").append(got.size())
                .append(connecting ? " (the rest through Kafka while the exporter connection was set up)" : ""));
        if (connecting) {
            KafkaFixtures.assertReadByRdma(c, got.size(), label);
        } else {
            assertThat(total).as("records by RDMA (%s)", label).isEqualTo(got.size());
        }
        assertRdmaRead(c);
    }

    /** Polls until at least {@code count} records came (the topic holds more); returns them all. */
    static List<Seen> pollAtLeast(Consumer<String, String> c, int count) {
        List<Seen> out = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (out.size() < count && System.nanoTime() < deadline) {
            c.poll(Duration.ofMillis(200)).forEach(r -> out.add(Seen.of(r)));
        }
        assertThat(out.size()).as("records consumed").isGreaterThanOrEqualTo(count);
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
        awaitLeaders(admin, latest);
        return name;
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
        Map<TopicPartition, Long> ends = new java.util.HashMap<>();
        for (var ack : acks) {
            var sent = ack.get(); // throws the send's failure
            ends.merge(new TopicPartition(sent.topic(), sent.partition()), sent.offset() + 1, Math::max);
        }
        // Consume only once the exporter serves what was produced: otherwise a short test can finish on the
        // normal fetch path before the exporter has even seen the new topic, and prove nothing about RDMA.
        for (var end : ends.entrySet()) {
            awaitExported(end.getKey(), end.getValue());
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

    /**
     * An RDMA consumer whose records all come by RDMA: its partitions wait for the exporter connection rather than
     * being fetched through Kafka meanwhile ({@link KafkaFixtures#waitingForRdma}), so the test covers the RDMA path
     * for every record.
     */
    private Consumer<String, String> rdmaOnly(Map<String, Object> extra) {
        return rdmaConsumer(KafkaFixtures.waitingForRdma(extra));
    }

    private Consumer<String, String> rdmaConsumer(Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>(consumerProps(Map.of()));
        p.put("rdma.fetch.enabled", "true");
        p.put("rdma.exporter.address", address(exporter.address()));
        p.put("rdma.provider", "tcp");
        p.putAll(extra);
        return RdmaConsumerFactory.create(p, null, null);
    }
}
