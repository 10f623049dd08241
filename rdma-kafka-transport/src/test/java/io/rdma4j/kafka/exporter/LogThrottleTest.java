package io.rdma4j.kafka.exporter;

import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;

class LogThrottleTest {

    @Test
    void oneEventPerIntervalGoesLoudlyAndNamesHowManyWentQuietly() throws InterruptedException {
        LogThrottle throttle = new LogThrottle(Duration.ofMillis(500));
        assertThat(throttle.loudOrQuiet()).as("the first, loudly, after none").isZero();
        for (int i = 0; i < 3; i++) {
            assertThat(throttle.loudOrQuiet()).as("within the interval: quietly").isEqualTo(-1);
        }
        Thread.sleep(600);
        assertThat(throttle.loudOrQuiet()).as("the next interval's first, loudly, naming the 3 quiet ones").isEqualTo(3);
        assertThat(throttle.loudOrQuiet()).isEqualTo(-1);
    }
}
