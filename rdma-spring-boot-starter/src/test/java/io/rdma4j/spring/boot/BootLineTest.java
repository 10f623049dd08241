package io.rdma4j.spring.boot;

import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootVersion;

import static org.assertj.core.api.Assertions.assertThat;

/** Proves which Spring Boot line a surefire execution really runs on (4 by default, 3 in boot3-test). */
class BootLineTest {

    @Test
    void runsOnTheExpectedBootLine() {
        String expectedMajor = System.getProperty("rdma4j.expected.boot.major", "4");
        assertThat(SpringBootVersion.getVersion()).startsWith(expectedMajor + ".");
    }
}
