package io.rdma4j.samples.transport;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** The smallest program runs as {@code -Pdemo} runs it and leaves its row for the demos' table. */
class TransportDemoTest {

    @Test
    void readsThePublishedRegionAndReportsOk(@TempDir Path dir) throws Exception {
        Path result = dir.resolve("demo-result.tsv");
        System.setProperty("demo.result", result.toString());
        try {
            TransportDemo.main(new String[0]);
        } finally {
            System.clearProperty("demo.result");
        }
        String[] row = Files.readString(result).split("\t");
        assertThat(row).hasSize(5);
        assertThat(row[0]).isEqualTo("transport-demo");
        assertThat(row[1]).matches("(tcp|verbs) \\(.*\\)");
        assertThat(row[2]).isEqualTo("16 MiB region, 1 read");
        assertThat(row[3]).isEqualTo(row[1].startsWith("verbs") ? "RDMA READ" : "emulated READ (tcp)");
        assertThat(row[4]).isEqualTo("OK, bytes identical");
    }
}
