package io.rdma4j.it.lab;

import org.junit.jupiter.api.Test;

/**
 * Runs it/bench-netty's benchmark over rxe0 in the soft-RDMA lab ({@code NettyBenchmarkGuestTest}), in a boot of its
 * own (about 5 minutes), so {@code verify} leaves it out and the {@code bench} profile runs it:
 * {@code ./mvnw -B -Pbench -pl it/lab -am verify -Dtest=NettyBenchmarkLabTest -Dsurefire.failIfNoSpecifiedTests=false}.
 * rxe0 unless {@code rdma4j.lab.devices} names others.
 */
class NettyBenchmarkLabTest {

    @Test
    void nettyBenchmarkRunsOverRxe() throws Exception {
        if (System.getProperty("rdma4j.lab.devices", "").isBlank()) {
            System.setProperty("rdma4j.lab.devices", "rxe0");
        }
        LabRunner.fromSystemProperties("io\\.rdma4j\\.it\\.lab\\.NettyBenchmarkGuestTest").requireGuestSuitePasses();
    }
}
