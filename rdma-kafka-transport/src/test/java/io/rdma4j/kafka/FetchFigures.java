package io.rdma4j.kafka;

import io.rdma4j.testsupport.kafka.KafkaFixtures;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.TopicPartition;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.LongStream;

import static org.assertj.core.api.Assertions.assertThat;

/** What an RDMA consumer's metrics say, for the tests' assertions and messages. */
final class FetchFigures {

    private FetchFigures() {
    }

    /** The consumer's {@code fallbacks-total} per reason (those above zero). */
    static Map<String, Double> fallbacks(Consumer<?, ?> c) {
        return KafkaFixtures.fallbacks(c);
    }

    /** The consumer's {@code records-rdma-total} of {@code tp}; 0 before RDMA read it. */
    static double rdmaRecords(Consumer<?, ?> c, TopicPartition tp) {
        return c.metrics().entrySet().stream()
                .filter(e -> e.getKey().group().equals(RdmaFetchMetrics.GROUP) && e.getKey().name().equals("records-rdma-total")
                        && tp.topic().equals(e.getKey().tags().get("topic"))
                        && String.valueOf(tp.partition()).equals(e.getKey().tags().get("partition")))
                .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue()).findFirst().orElse(0);
    }

    /** Polls {@code c} until it counts a fallback for {@code reason}, as a consumer goes on polling after its records. */
    static void pollUntilFallback(Consumer<?, ?> c, String reason) {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!fallbacks(c).containsKey(reason)) {
            assertThat(System.nanoTime()).as("a %s fallback within 30 s, fallbacks %s", reason, fallbacks(c)).isLessThan(deadline);
            assertThat(c.poll(Duration.ofMillis(50)).count()).as("records beyond the end").isZero();
        }
    }

    /** Waits (without polling) until {@code ready} holds: what a consumer set up off its polling thread is done. */
    static void await(java.util.function.BooleanSupplier ready, String what) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!ready.getAsBoolean()) {
            assertThat(System.nanoTime()).as("%s within 30 s", what).isLessThan(deadline);
            Thread.sleep(10);
        }
    }

    /** The consumer's open connections to exporters ({@code transport-connections}). */
    static double connections(Consumer<?, ?> c) {
        return c.metrics().entrySet().stream()
                .filter(e -> e.getKey().group().equals(RdmaFetchMetrics.GROUP) && e.getKey().name().equals("transport-connections"))
                .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue()).findFirst().orElse(0);
    }

    /**
     * Polls an RDMA consumer and notes, per partition, the offsets each poll returned and the path they came by: RDMA
     * when the partition's {@code records-rdma-total} grew by as many, Kafka's fetch when it did not grow (a poll
     * returns a partition's records from one path or the other).
     */
    static final class Paths {
        private final Consumer<String, String> consumer;
        private final Map<TopicPartition, List<Long>> offsets = new HashMap<>();
        /** Per partition, a letter per poll that returned some of its records: K by Kafka, R by RDMA. */
        private final Map<TopicPartition, StringBuilder> order = new HashMap<>();
        private int records;

        Paths(Consumer<String, String> consumer) {
            this.consumer = consumer;
        }

        /** Polls once; returns how many records came. */
        int poll(Duration timeout) {
            Map<TopicPartition, Double> before = new HashMap<>();
            consumer.assignment().forEach(tp -> before.put(tp, rdmaRecords(consumer, tp)));
            ConsumerRecords<String, String> got = consumer.poll(timeout);
            for (TopicPartition tp : got.partitions()) {
                List<ConsumerRecord<String, String>> some = got.records(tp);
                double byRdma = rdmaRecords(consumer, tp) - before.getOrDefault(tp, 0.0);
                assertThat(byRdma).as("records of %s by RDMA in a poll that returned %d of them", tp, some.size())
                        .isIn(0.0, (double) some.size());
                order.computeIfAbsent(tp, t -> new StringBuilder()).append(byRdma == 0 ? 'K' : 'R');
                some.forEach(r -> offsets.computeIfAbsent(tp, t -> new ArrayList<>()).add(r.offset()));
            }
            records += got.count();
            return got.count();
        }

        int records() {
            return records;
        }

        /** Per partition, K or R for each poll that returned its records. */
        Map<TopicPartition, String> order() {
            Map<TopicPartition, String> out = new HashMap<>();
            order.forEach((tp, o) -> out.put(tp, o.toString()));
            return out;
        }

        /**
         * Each partition's records are its offsets from 0 to its end, each once and in order: those Kafka's fetch
         * returned first (if any), then the rest by RDMA, never Kafka again.
         */
        void assertKafkaThenRdma(Map<TopicPartition, Long> ends) {
            for (var end : ends.entrySet()) {
                TopicPartition tp = end.getKey();
                assertThat(offsets.get(tp)).as("offsets of %s, each once and in order", tp)
                        .containsExactlyElementsOf(LongStream.range(0, end.getValue()).boxed().toList());
                assertThat(order.get(tp).toString()).as("paths of %s's polls (K Kafka, R RDMA)", tp).matches("K*R+");
            }
        }
    }
}
