package io.rdma4j.it.lab.kafka;

import io.rdma4j.it.lab.LabRunner;
import org.junit.jupiter.api.Test;

/**
 * Runs this module's {@code *GuestTest} classes (a Kafka flow on the verbs provider) inside the soft-RDMA lab
 * on rxe0, and requires that they ran and passed. Without a lab this fails rather than skips.
 */
class KafkaOverRxeLabTest {

    @Test
    void kafkaFlowPassesOnRxe() throws Exception {
        LabRunner.fromSystemProperties().requireGuestSuitePasses();
    }
}
