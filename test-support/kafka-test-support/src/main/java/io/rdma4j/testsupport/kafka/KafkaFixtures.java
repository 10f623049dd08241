package io.rdma4j.testsupport.kafka;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringSerializer;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the Kafka tests of rdma-kafka-transport, the Spring starter, the soft-RDMA lab and the benchmarks share: records
 * reduced to what must match, creating topics and waiting for their leaders, producing keyed records, polling until a
 * count, an exporter's address, and the RDMA consumer's figures read from {@code metrics()} by their public names.
 */
public final class KafkaFixtures {

    /** The metric group of an RDMA consumer's figures in {@code metrics()}. */
    public static final String RDMA_METRICS_GROUP = "consumer-rdma-fetch-metrics";

    private KafkaFixtures() {
    }

    /** A record reduced to what must match: partition, offset, key, value, headers, timestamp. */
    public record Seen(int partition, long offset, String key, String value, List<String> headers, long timestamp) {
        public static Seen of(ConsumerRecord<String, String> r) {
            List<String> h = new ArrayList<>();
            for (Header header : r.headers()) {
                h.add(header.key() + "=" + Arrays.toString(header.value()));
            }
            return new Seen(r.partition(), r.offset(), r.key(), r.value(), h, r.timestamp());
        }
    }

    /** {@code rdma.exporter.address} of an exporter listening on {@code listening} (a wildcard or loopback address). */
    public static String address(InetSocketAddress listening) {
        return "127.0.0.1:" + listening.getPort();
    }

    public static List<Seen> pollUntil(Consumer<String, String> c, int count) {
        return pollUntil(c, count, () -> { });
    }

    public static List<Seen> pollUntil(Consumer<String, String> c, int count, Runnable afterEachPoll) {
        List<Seen> out = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (out.size() < count && System.nanoTime() < deadline) {
            c.poll(Duration.ofMillis(200)).forEach(r -> out.add(Seen.of(r)));
            afterEachPoll.run();
        }
        // One more poll: nothing beyond what was expected may show up (no duplicates).
        c.poll(Duration.ofMillis(300)).forEach(r -> out.add(Seen.of(r)));
        assertThat(out).as("records consumed").hasSize(count);
        return out;
    }

    /** Retries ListOffsets until every partition's leader answers (the Admin metadata may not know the topic yet). */
    public static void awaitLeaders(Admin admin, Map<TopicPartition, OffsetSpec> partitions) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (true) {
            try {
                admin.listOffsets(partitions).all().get();
                return;
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof org.apache.kafka.common.errors.RetriableException) || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(50);
            }
        }
    }

    /**
     * Creates {@code topic} with {@code partitions} single-replica partitions and waits for their leaders: a produce
     * before that fails NOT_LEADER and may lose its first batch.
     */
    public static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int p = 0; p < partitions; p++) {
                latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
            }
            awaitLeaders(admin, latest);
        }
    }

    public static String value(int i, int size) {
        String prefix = "v" + i + "-";
        return prefix + "x".repeat(Math.max(0, size - prefix.length()));
    }

    /** Sends {@code count} records {@code key-<i>}/{@code value-<i>} to {@code topic} and waits until each is acknowledged. */
    public static void produceKeyed(String bootstrap, String topic, int count) throws Exception {
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> p = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap,
                "key.serializer", StringSerializer.class, "value.serializer", StringSerializer.class))) {
            for (int i = 0; i < count; i++) {
                acks.add(p.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)));
            }
        }
        for (Future<RecordMetadata> ack : acks) {
            ack.get();
        }
    }

    /** The consumer's records read by RDMA so far, from its {@code metrics()} ({@code records-rdma-total}). */
    public static long rdmaRecords(Consumer<?, ?> c) {
        return rdmaTotal(c, "records-rdma-total");
    }

    /** The consumer's {@code fallbacks-total} per {@code reason} tag, those above zero. */
    public static Map<String, Double> fallbacks(Consumer<?, ?> c) {
        Map<String, Double> out = new java.util.TreeMap<>();
        c.metrics().forEach((n, m) -> {
            if (n.name().equals("fallbacks-total") && ((Number) m.metricValue()).doubleValue() > 0) {
                out.put(n.tags().get("reason"), ((Number) m.metricValue()).doubleValue());
            }
        });
        return out;
    }

    /**
     * {@code props} with {@code rdma.fetch.setup.wait.ms} at 30 s: a new RDMA consumer's partitions wait for their
     * exporter connections rather than being fetched through Kafka meanwhile, so that every record is RDMA's.
     */
    public static Map<String, Object> waitingForRdma(Map<String, ?> props) {
        Map<String, Object> out = new HashMap<>(props);
        out.put("rdma.fetch.setup.wait.ms", "30000");
        return out;
    }

    /**
     * Every one of the {@code records} a new RDMA consumer returned came by RDMA, but those Kafka's fetch returned while
     * its connections to the exporters were still being set up (a consumer does not wait for them): then the only
     * fallbacks are {@code exporter-connecting} ones, and RDMA read the rest.
     */
    public static void assertReadByRdma(Consumer<?, ?> c, long records, String label) {
        Map<String, Double> fallbacks = fallbacks(c);
        long rdma = rdmaRecords(c);
        assertThat(fallbacks.keySet()).as("fallback reasons of %s", label).isSubsetOf("exporter-connecting");
        if (fallbacks.isEmpty()) {
            assertThat(rdma).as("records by RDMA of %s", label).isEqualTo(records);
        } else {
            assertThat(rdma).as("records by RDMA of %s, the rest through Kafka while it connected", label).isPositive()
                    .isLessThanOrEqualTo(records);
        }
    }

    /** Fetches the consumer retried at once after a rejected READ or a closed connection ({@code retries-total}). */
    public static long rdmaRetries(Consumer<?, ?> c) {
        return rdmaTotal(c, "retries-total");
    }

    /** Batches read by RDMA that failed their CRC check ({@code crc-failures-total}). */
    public static long crcFailures(Consumer<?, ?> c) {
        return rdmaTotal(c, "crc-failures-total");
    }

    /**
     * A client-wide figure of the consumer's RDMA group (not a partition's). Named as a monitoring system names it:
     * this module sits below rdma-kafka-transport.
     */
    private static long rdmaTotal(Consumer<?, ?> c, String name) {
        return c.metrics().entrySet().stream()
                .filter(e -> e.getKey().group().equals(RDMA_METRICS_GROUP) && e.getKey().name().equals(name)
                        && e.getKey().tags().keySet().equals(java.util.Set.of("client-id")))
                .mapToLong(e -> ((Number) e.getValue().metricValue()).longValue()).findFirst().orElse(0);
    }
}
