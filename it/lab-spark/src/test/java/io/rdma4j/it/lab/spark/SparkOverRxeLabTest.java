package io.rdma4j.it.lab.spark;

import io.rdma4j.it.lab.LabRunner;
import org.junit.jupiter.api.Test;

/**
 * Runs this module's {@code *GuestTest} classes (a Spark job shuffling on the verbs provider) inside the soft-RDMA lab
 * on rxe0, and requires that they ran and passed. Without a lab this fails rather than skips.
 */
class SparkOverRxeLabTest {

    @Test
    void sparkJobPassesOnRxe() throws Exception {
        LabRunner.fromSystemProperties().requireGuestSuitePasses();
    }
}
