package io.rdma4j.it.lab;

import org.junit.jupiter.api.Test;

/**
 * Runs the guest suite (every {@code *GuestTest} class) inside the soft-RDMA lab VM, on rxe0 (Soft-RoCE)
 * and siw0 (soft-iWARP), and requires that it ran tests and all of them passed. Without a lab this fails
 * rather than skips: the lab is part of the build (see it/lab/README.md).
 */
class SoftRdmaLabTest {

    @Test
    void guestSuitePassesOnRxeAndSiw() throws Exception {
        LabRunner.fromSystemProperties().requireGuestSuitePasses();
    }
}
