package io.rdma4j.it.lab.kafka;

import io.rdma4j.it.lab.LabRunner;
import org.junit.jupiter.api.Test;

/**
 * Runs the Kafka read benchmark over rxe0 ({@code RdmaConsumerRxeBenchmarkGuestTest}) inside the soft-RDMA lab, in a
 * boot of its own. {@code verify} leaves it out; the {@code bench} profile runs it:
 * {@code ./mvnw -B -Pbench -pl it/lab-kafka -am verify -Dtest=KafkaRxeBenchmarkLabTest -Dsurefire.failIfNoSpecifiedTests=false}.
 */
class KafkaRxeBenchmarkLabTest {

    @Test
    void kafkaReadBenchmarkRunsOnRxe() throws Exception {
        LabRunner.fromSystemProperties(LabRunner.BENCHMARK_INCLUDE).requireGuestSuitePasses();
    }
}
