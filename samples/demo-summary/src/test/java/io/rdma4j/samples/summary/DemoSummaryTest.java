package io.rdma4j.samples.summary;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** The table command 1 ends with: one row per demo, columns aligned, a demo that did not run said so. */
class DemoSummaryTest {

    @Test
    void printsARowPerDemoAndSaysWhichDidNotRun(@TempDir Path samples) throws Exception {
        Files.createDirectories(samples.resolve("transport-demo/target"));
        Files.writeString(samples.resolve("transport-demo/target/demo-result.tsv"), String.join("\t", "transport-demo",
                "tcp (auto: no RDMA device found; run rdma4j-doctor.jar for details)", "16 MiB region, 1 read",
                "emulated READ (tcp)", "OK, bytes identical"));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream original = System.out;
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        try {
            DemoSummary.main(new String[] {samples.toString()});
        } finally {
            System.setOut(original);
        }
        String[] lines = out.toString(StandardCharsets.UTF_8).strip().split("\n");
        assertThat(lines[0]).startsWith("demo            provider (why)");
        assertThat(lines[1]).matches("-+");
        assertThat(lines[2]).startsWith("transport-demo  tcp (auto: no RDMA device found)  16 MiB region, 1 read")
                .endsWith("emulated READ (tcp)  OK, bytes identical");
        assertThat(lines[3]).startsWith("spring-demo").endsWith("did not run");
        assertThat(lines[4]).startsWith("spark-demo").endsWith("did not run");
        assertThat(lines[5]).startsWith("kafka-demo").endsWith("did not run");
        assertThat(lines[6]).startsWith("Why this provider, in detail: the doctor");
    }
}
