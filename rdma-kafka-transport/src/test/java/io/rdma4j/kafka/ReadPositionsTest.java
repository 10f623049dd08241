package io.rdma4j.kafka;

import io.rdma4j.kafka.protocol.SegmentDirectory;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Where the offset reset of a partition without a position is expected to go, which a new consumer's directory
 * lookups are sent for before the reset is done: from {@code seekToBeginning}, {@code seekToEnd} and
 * {@code auto.offset.reset}, over a real internal KafkaConsumer (assignment, seeks and positions are its own state,
 * so no broker is needed).
 */
class ReadPositionsTest {

    private static final TopicPartition A = new TopicPartition("t", 0);
    private static final TopicPartition B = new TopicPartition("t", 1);
    private static final TopicPartition C = new TopicPartition("t", 2);

    private static KafkaConsumer<byte[], byte[]> internal() {
        return new KafkaConsumer<>(Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:1"),
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Test
    void aResetIsExpectedWhereTheLastSeekToASideOrElseAutoOffsetResetSendsIt() {
        try (KafkaConsumer<byte[], byte[]> delegate = internal()) {
            delegate.assign(List.of(A, B, C));
            ReadPositions positions = new ReadPositions(delegate, " Earliest ", false, false);
            assertThat(positions.resetGuess(A)).hasValue(SegmentDirectory.Request.EARLIEST);

            positions.resetting(List.of(B, C), true);
            assertThat(positions.resetGuess(B)).hasValue(SegmentDirectory.Request.LATEST);
            positions.resetting(List.of(B), false);
            assertThat(positions.resetGuess(B)).hasValue(SegmentDirectory.Request.EARLIEST);
            positions.resetting(List.of(B), true);
            positions.forget(List.of(B)); // a seek to an offset
            assertThat(positions.resetGuess(B)).as("a later reset goes by auto.offset.reset").hasValue(SegmentDirectory.Request.EARLIEST);

            delegate.seek(C, 9); // as the reset seekToEnd asked for completes
            assertThat(positions.position(C)).isEqualTo(9);
            assertThat(positions.resetGuess(C)).as("done: a later reset (out of range) goes by auto.offset.reset")
                    .hasValue(SegmentDirectory.Request.EARLIEST);

            positions.resetting(List.of(A), true);
            positions.retain(java.util.Set.of(B, C)); // A unassigned, then assigned again
            assertThat(positions.resetGuess(A)).hasValue(SegmentDirectory.Request.EARLIEST);
        }
    }

    @Test
    void noResetIsExpectedWhereNoExporterAnswers() {
        try (KafkaConsumer<byte[], byte[]> delegate = internal()) {
            delegate.assign(List.of(A));
            assertThat(new ReadPositions(delegate, "latest", false, false).resetGuess(A)).hasValue(SegmentDirectory.Request.LATEST);
            assertThat(new ReadPositions(delegate, "none", false, false).resetGuess(A)).isEmpty();
            assertThat(new ReadPositions(delegate, "by_duration:P1D", false, false).resetGuess(A)).isEmpty();

            // read_committed: the latest offset is the last stable one, which an exporter does not answer at
            ReadPositions readCommitted = new ReadPositions(delegate, "latest", false, true);
            assertThat(readCommitted.resetGuess(A)).isEmpty();
            readCommitted.resetting(List.of(A), false);
            assertThat(readCommitted.resetGuess(A)).hasValue(SegmentDirectory.Request.EARLIEST);
            readCommitted.resetting(List.of(A), true);
            assertThat(readCommitted.resetGuess(A)).isEmpty();
        }
    }

    /**
     * With a {@code group.id}, a partition starts at the group's committed offset where it has one, which is not known
     * here: only {@code seekToBeginning} and {@code seekToEnd}, which override it, say where it goes, and only until
     * the partition is revoked.
     */
    @Test
    void inAGroupOnlyASeekToASideTellsWhereTheResetGoes() {
        try (KafkaConsumer<byte[], byte[]> delegate = internal()) {
            delegate.assign(List.of(A, B));
            ReadPositions positions = new ReadPositions(delegate, "earliest", true, false);
            assertThat(positions.resetGuess(A)).isEmpty();
            positions.resetting(List.of(A, B), true);
            assertThat(positions.resetGuess(A)).hasValue(SegmentDirectory.Request.LATEST);
            positions.revoke(List.of(A));
            assertThat(positions.resetGuess(A)).as("assigned again: the committed offset").isEmpty();
            assertThat(positions.resetGuess(B)).hasValue(SegmentDirectory.Request.LATEST);
        }
    }
}
