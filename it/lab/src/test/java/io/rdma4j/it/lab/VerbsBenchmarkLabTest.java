package io.rdma4j.it.lab;

import org.junit.jupiter.api.Test;

/**
 * Runs the verbs benchmark against perftest ({@code VerbsBenchmarkGuestTest}) inside the soft-RDMA lab on rxe0 and
 * siw0, in a boot of its own. It takes about 20 minutes, so {@code verify} leaves it out and the {@code bench}
 * profile runs it:
 * {@code ./mvnw -B -Pbench -pl it/lab -am verify -Dtest=VerbsBenchmarkLabTest -Dsurefire.failIfNoSpecifiedTests=false}.
 */
class VerbsBenchmarkLabTest {

    @Test
    void benchmarkRunsAgainstPerftestOnRxeAndSiw() throws Exception {
        LabRunner.fromSystemProperties(".*VerbsBenchmarkGuestTest").requireGuestSuitePasses();
    }
}
