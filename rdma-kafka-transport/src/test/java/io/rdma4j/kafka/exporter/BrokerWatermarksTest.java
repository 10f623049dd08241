package io.rdma4j.kafka.exporter;

import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeTopicsResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.internals.KafkaFutureImpl;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Proxy;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The broker's answers as a refresh takes them, from an Admin client that answers as told: each partition on its own,
 * a silent one left out after the wait, the leaders learnt at most once a second, every request counted.
 */
class BrokerWatermarksTest {

    private static final TopicPartition ORDERS_0 = new TopicPartition("orders", 0);
    private static final TopicPartition ORDERS_1 = new TopicPartition("orders", 1);
    private static final TopicPartition GONE = new TopicPartition("gone", 0);

    /** Answers listOffsets and describeTopics from its maps; a partition it has no offset for is never answered. */
    private static final class FakeBroker {
        final Map<TopicPartition, Long> highWatermarks = new HashMap<>();
        final Map<TopicPartition, Long> lastStableOffsets = new HashMap<>();
        final Map<TopicPartition, Long> logStartOffsets = new HashMap<>();
        final Map<String, List<TopicPartitionInfo>> topics = new HashMap<>();
        final AtomicInteger describes = new AtomicInteger();

        Admin admin() {
            return (Admin) Proxy.newProxyInstance(Admin.class.getClassLoader(), new Class<?>[] {Admin.class},
                    (proxy, method, args) -> switch (method.getName()) {
                        case "listOffsets" -> listOffsets(args);
                        case "describeTopics" -> describeTopics(args);
                        default -> throw new UnsupportedOperationException(method.getName());
                    });
        }

        @SuppressWarnings("unchecked")
        private ListOffsetsResult listOffsets(Object[] args) {
            Map<TopicPartition, OffsetSpec> asked = (Map<TopicPartition, OffsetSpec>) args[0];
            boolean committed = args.length > 1 && ((ListOffsetsOptions) args[1]).isolationLevel() == IsolationLevel.READ_COMMITTED;
            Map<TopicPartition, KafkaFuture<ListOffsetsResult.ListOffsetsResultInfo>> answers = new HashMap<>();
            asked.forEach((tp, spec) -> {
                Map<TopicPartition, Long> source = spec instanceof OffsetSpec.EarliestSpec ? logStartOffsets
                        : committed ? lastStableOffsets : highWatermarks;
                KafkaFutureImpl<ListOffsetsResult.ListOffsetsResultInfo> answer = new KafkaFutureImpl<>();
                if (tp.equals(GONE)) {
                    answer.completeExceptionally(new UnknownTopicOrPartitionException("deleted"));
                } else if (source.containsKey(tp)) {
                    answer.complete(new ListOffsetsResult.ListOffsetsResultInfo(source.get(tp), -1, Optional.empty()));
                }
                answers.put(tp, answer);
            });
            return new ListOffsetsResult(answers);
        }

        @SuppressWarnings("unchecked")
        private DescribeTopicsResult describeTopics(Object[] args) {
            describes.incrementAndGet();
            Map<String, KafkaFuture<TopicDescription>> answers = new HashMap<>();
            for (String topic : (Collection<String>) args[0]) {
                KafkaFutureImpl<TopicDescription> answer = new KafkaFutureImpl<>();
                if (topics.containsKey(topic)) {
                    answer.complete(new TopicDescription(topic, false, topics.get(topic)));
                } else {
                    answer.completeExceptionally(new UnknownTopicOrPartitionException(topic));
                }
                answers.put(topic, answer);
            }
            return new DescribeTopicsResult(null, answers) { };
        }
    }

    private static TopicPartitionInfo led(int partition, Node leader) {
        return new TopicPartitionInfo(partition, leader, List.of(), List.of());
    }

    @Test
    void eachPartitionIsAnsweredOnItsOwnAndOneWithoutAnAnswerIsLeftOut() throws Exception {
        FakeBroker fake = new FakeBroker();
        fake.highWatermarks.put(ORDERS_0, 120L);
        fake.lastStableOffsets.put(ORDERS_0, 110L);
        fake.logStartOffsets.put(ORDERS_0, 5L);
        fake.logStartOffsets.put(ORDERS_1, 0L); // its high watermarks are never answered
        fake.topics.put("orders", List.of(led(0, new Node(2, "b2", 9092)), led(1, Node.noNode())));
        BrokerWatermarks broker = new BrokerWatermarks(fake.admin());

        long before = System.nanoTime();
        BrokerWatermarks.Answers answers = broker.ask(List.of(ORDERS_0, ORDERS_1, GONE));
        assertThat(System.nanoTime() - before).as("the silent partition is waited for about a second, not longer")
                .isLessThan(TimeUnit.SECONDS.toNanos(5));

        assertThat(answers.highWatermarks()).containsExactly(Map.entry(ORDERS_0, 120L));
        assertThat(answers.lastStableOffsets()).containsExactly(Map.entry(ORDERS_0, 110L));
        assertThat(answers.logStartOffsets()).containsOnly(Map.entry(ORDERS_0, 5L), Map.entry(ORDERS_1, 0L));
        assertThat(answers.leaders()).as("a partition without a leader, or whose topic is gone, has none")
                .containsExactly(Map.entry(ORDERS_0, 2));
        assertThat(broker.leader(ORDERS_0)).isEqualTo(2);
        assertThat(broker.leader(ORDERS_1)).isEqualTo(Watermark.UNKNOWN_LEADER);
    }

    @Test
    void leadersAreLearntAtMostOnceASecondAndEveryRequestCounts() throws Exception {
        FakeBroker fake = new FakeBroker();
        fake.highWatermarks.put(ORDERS_0, 7L);
        fake.lastStableOffsets.put(ORDERS_0, 7L);
        fake.logStartOffsets.put(ORDERS_0, 0L);
        fake.topics.put("orders", List.of(led(0, new Node(1, "b1", 9092))));
        BrokerWatermarks broker = new BrokerWatermarks(fake.admin());

        broker.ask(List.of(ORDERS_0));
        assertThat(fake.describes).as("the first refresh learns the leaders").hasValue(1);
        assertThat(broker.requests()).as("three offset requests and one metadata request").isEqualTo(4);

        fake.topics.put("orders", List.of(led(0, new Node(3, "b3", 9092))));
        BrokerWatermarks.Answers soon = broker.ask(List.of(ORDERS_0));
        assertThat(fake.describes).as("the next refresh within a second does not").hasValue(1);
        assertThat(broker.requests()).isEqualTo(7);
        assertThat(soon.leaders()).as("the leaders last learnt").containsExactly(Map.entry(ORDERS_0, 1));

        Thread.sleep(1100);
        BrokerWatermarks.Answers later = broker.ask(List.of(ORDERS_0));
        assertThat(fake.describes).hasValue(2);
        assertThat(broker.requests()).isEqualTo(11);
        assertThat(later.leaders()).as("the new leader after an election").containsExactly(Map.entry(ORDERS_0, 3));
        assertThat(later.highWatermarks()).containsExactly(Map.entry(ORDERS_0, 7L));
    }
}
