package io.rdma4j.kafka;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Which partitions RDMA serves, and the pauses of a real internal KafkaConsumer kept in step with it. Assignment and
 * pauses are the consumer's own state, so no broker is needed (nothing here polls).
 */
class ServedPartitionsTest {

    private static final TopicPartition A = new TopicPartition("t", 0);
    private static final TopicPartition B = new TopicPartition("t", 1);
    private static final TopicPartition C = new TopicPartition("t", 2);

    /** A ServedPartitions over an internal consumer and a fetcher of a tcp transport, closed together. */
    private static final class RdmaServed implements AutoCloseable {
        final KafkaConsumer<byte[], byte[]> delegate = internal();
        final RdmaTransport transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
        final RdmaFetcher fetcher = new RdmaFetcher(transport, new InetSocketAddress("127.0.0.1", 1), Duration.ofSeconds(1));
        final ReadPositions positions = new ReadPositions(delegate, "latest", false, false);
        final ServedPartitions served = new ServedPartitions(delegate, fetcher, positions, new RdmaReadLog("tcp"),
                RdmaFetchMetrics.detached());

        @Override
        public void close() {
            try (delegate; transport; fetcher) {
                // closed in reverse order: the fetcher, the transport, the consumer
            }
        }
    }

    private static KafkaConsumer<byte[], byte[]> internal() {
        return new KafkaConsumer<>(Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:1"),
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Test
    void rdmasPartitionsAreFetchedInTurnAndPausedInTheInternalConsumer() {
        try (RdmaServed rdma = new RdmaServed()) {
            KafkaConsumer<byte[], byte[]> delegate = rdma.delegate;
            ServedPartitions served = rdma.served;
            delegate.assign(List.of(A, B, C));
            served.sync();
            assertThat(delegate.paused()).as("RDMA serves all three").containsExactlyInAnyOrder(A, B, C);
            assertThat(served.paused()).as("none paused by the application").isEmpty();

            List<TopicPartition> first = served.inTurn();
            List<TopicPartition> second = served.inTurn();
            assertThat(second).containsExactlyInAnyOrderElementsOf(first);
            assertThat(second.getFirst()).as("each poll starts with the next partition").isEqualTo(first.get(1));

            served.pause(List.of(B));
            served.fellBack(C, Duration.ofHours(1));
            served.sync();
            assertThat(served.inTurn()).containsExactly(A);
            assertThat(delegate.paused()).as("C left to Kafka's fetch").containsExactlyInAnyOrder(A, B);
            assertThat(served.paused()).containsExactly(B);

            served.resume(List.of(B));
            served.sync();
            assertThat(served.inTurn()).containsExactlyInAnyOrder(A, B);
            assertThat(delegate.paused()).containsExactlyInAnyOrder(A, B);

            served.pause(List.of(A));
            delegate.assign(List.of(B, C));
            served.sync();
            assertThat(served.paused()).as("the pause of an unassigned partition is forgotten").isEmpty();
            delegate.assign(List.of(A, B, C));
            served.sync();
            assertThat(served.paused()).isEmpty();
            assertThat(served.inTurn()).as("C still in its fallback period").containsExactlyInAnyOrder(A, B);
        }
    }

    /**
     * A partition held for its exporter connection ({@code rdma.fetch.setup.wait.ms}) stays paused in the internal
     * consumer while the connection is set up on another thread, even when it is set up during a sync: held, then RDMA's,
     * never resumed for Kafka's fetch in between.
     */
    @Test
    void aPartitionHeldForItsConnectionIsNotResumedAsTheConnectionComesUpDuringASync() {
        try (RdmaServed rdma = new RdmaServed()) {
            KafkaConsumer<byte[], byte[]> delegate = rdma.delegate;
            ServedPartitions served = rdma.served;
            delegate.assign(List.of(A));
            served.sync();
            // Set up as soon as the sync first looks at it, as a connect completing on the setup thread meanwhile.
            CompletableFuture<Void> setUpWhileLookedAt = new CompletableFuture<>() {
                @Override
                public boolean isDone() {
                    boolean before = super.isDone();
                    complete(null);
                    return before;
                }
            };
            served.fellBack(A, Duration.ofSeconds(1), setUpWhileLookedAt, Duration.ofSeconds(30));
            served.sync();
            assertThat(delegate.paused()).as("held while its connection is set up").containsExactly(A);
            served.sync();
            assertThat(delegate.paused()).as("RDMA's once it is set up").containsExactly(A);
            assertThat(served.inTurn()).containsExactly(A);
        }
    }

    /**
     * A partition RDMA read ahead of the internal consumer goes back to Kafka's fetch at RDMA's position, also when the
     * application resumed it (it never paused it) after it fell back: Kafka's fetch would return those records again.
     */
    @Test
    void aPartitionTheApplicationResumedGoesBackToKafkaAtRdmasPosition() {
        try (RdmaServed rdma = new RdmaServed()) {
            KafkaConsumer<byte[], byte[]> delegate = rdma.delegate;
            ServedPartitions served = rdma.served;
            ReadPositions positions = rdma.positions;
            delegate.assign(List.of(A));
            delegate.seek(A, 100);
            served.sync();
            positions.advance(A, 150, Optional.empty()); // RDMA returned offsets 100 to 149
            served.fellBack(A, Duration.ofHours(1));
            served.resume(List.of(A)); // as resume(assignment()) does
            served.sync();
            assertThat(delegate.paused()).as("left to Kafka's fetch").isEmpty();
            assertThat(delegate.position(A)).as("Kafka's fetch starts where RDMA stopped").isEqualTo(150);
            assertThat(positions.position(A)).isEqualTo(150);
        }
    }

    /**
     * Under a subscription RDMA serves a partition from its assignment callback to its revocation: with
     * {@code group.protocol=consumer} the internal consumer's assignment also holds partitions before and after that.
     */
    @Test
    void underASubscriptionRdmaServesOnlyWhatTheGroupHandedOverAndDidNotRevoke() {
        try (RdmaServed rdma = new RdmaServed()) {
            KafkaConsumer<byte[], byte[]> delegate = rdma.delegate;
            ServedPartitions served = rdma.served;
            delegate.assign(List.of(A, B)); // what assignment() shows; the group's callbacks come through the calls below
            served.subscribed();
            served.handedOver(List.of(A));
            served.sync();
            assertThat(served.inTurn()).as("B's assignment callback has not run").containsExactly(A);
            assertThat(delegate.paused()).containsExactly(A);
            served.handedOver(List.of(B));
            served.revoked(List.of(A));
            served.sync();
            assertThat(served.inTurn()).as("A is being revoked").containsExactly(B);
            assertThat(delegate.paused()).containsExactly(B);
            served.assignedManually();
            served.sync();
            assertThat(served.inTurn()).as("assigned by the application: all of it").containsExactlyInAnyOrder(A, B);
        }
    }

    /**
     * A partition revoked while RDMA was ahead of the internal consumer is left out of commits while it stays assigned
     * ({@code group.protocol=consumer}): the internal consumer's position there is behind what was returned.
     */
    @Test
    void aRevokedPartitionRdmaWasAheadOnIsNotCommittedAtTheInternalConsumersPosition() {
        try (KafkaConsumer<byte[], byte[]> delegate = internal()) {
            ReadPositions positions = new ReadPositions(delegate, "latest", false, false);
            delegate.assign(List.of(A, B));
            delegate.seek(A, 100);
            delegate.seek(B, 200);
            positions.advance(A, 150, Optional.empty());
            assertThat(positions.consumed()).containsOnlyKeys(A, B).extractingByKey(A).extracting(o -> o.offset()).isEqualTo(150L);
            positions.revoke(List.of(A, B));
            assertThat(positions.consumed()).as("B's position is what was returned; A's is behind").containsOnlyKeys(B);
            positions.forget(List.of(A)); // assigned again: positioned afresh by Kafka
            assertThat(positions.consumed()).containsOnlyKeys(A, B);
        }
    }

    @Test
    void withRdmaOffOnlyTheApplicationsPausesReachTheInternalConsumer() {
        try (KafkaConsumer<byte[], byte[]> delegate = internal()) {
            ServedPartitions served = new ServedPartitions(delegate, null, new ReadPositions(delegate, "latest", false, false), new RdmaReadLog(""),
                    RdmaFetchMetrics.detached());
            delegate.assign(Set.of(A, B));
            served.pause(List.of(A));
            served.sync();
            assertThat(served.inTurn()).isEmpty();
            assertThat(delegate.paused()).containsExactly(A);
        }
    }
}
