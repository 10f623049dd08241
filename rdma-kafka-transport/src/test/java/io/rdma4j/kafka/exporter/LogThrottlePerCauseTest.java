package io.rdma4j.kafka.exporter;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;

class LogThrottlePerCauseTest {

    @Test
    void aNewKindOfFailureIsSaidAtOnceWhileAnOldOneGoesQuietly() {
        LogThrottlePerCause throttle = new LogThrottlePerCause(Duration.ofMinutes(1));
        RuntimeException memoryLimit = new IllegalStateException("refresh", new OutOfMemoryError("memlock"));
        assertThat(throttle.loudOrQuiet(memoryLimit)).as("the first failure, loudly").isZero();
        assertThat(throttle.loudOrQuiet(new RuntimeException("again", new OutOfMemoryError("memlock"))))
                .as("the same root cause wrapped otherwise: quietly").isEqualTo(-1);
        assertThat(throttle.loudOrQuiet(new UncheckedIOException(new IOException("truncated segment"))))
                .as("a new root cause, within the first one's interval: loudly").isZero();
        assertThat(throttle.loudOrQuiet(new IOException("truncated segment"))).isEqualTo(-1);
        assertThat(throttle.loudOrQuiet(memoryLimit)).isEqualTo(-1);
    }

    @Test
    void aCauseChainThatLoopsEnds() {
        RuntimeException a = new RuntimeException("a");
        RuntimeException b = new RuntimeException("b", a);
        a.initCause(b);
        assertThat(LogThrottlePerCause.rootCause(a)).isIn(a, b);
        assertThat(new LogThrottlePerCause(Duration.ofMinutes(1)).loudOrQuiet(a)).isZero();
    }

    @Test
    void theRootIsTheDeepestCause() {
        Throwable root = new IOException("disk");
        assertThat(LogThrottlePerCause.rootCause(new RuntimeException(new IllegalStateException(root)))).isSameAs(root);
        assertThat(LogThrottlePerCause.rootCause(root)).isSameAs(root);
    }
}
