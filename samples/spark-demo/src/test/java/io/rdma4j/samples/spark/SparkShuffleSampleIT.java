package io.rdma4j.samples.spark;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The README's Spark path without a Spark distribution: the sample's word count on a local cluster of two executor
 * JVMs, its shuffle read through rdma4j, run as {@code -Pdemo} runs it (fewer words), with the row it leaves for the
 * demos' table.
 */
class SparkShuffleSampleIT {

    @Test
    void theWordCountReadsTheOtherExecutorsBlocksThroughRdma4jAndReportsOk() throws Exception {
        Path result = Path.of(System.getProperty("demo.result"));
        Files.deleteIfExists(result);
        SparkShuffleSample.main(new String[] {System.getProperty("rdma4j.sparkJars"), "100000"});
        String[] row = Files.readString(result).split("\t");
        assertThat(row[0]).isEqualTo("spark-demo");
        assertThat(row[1]).as("provider and why").matches("(tcp|verbs) \\(auto: .*\\)");
        assertThat(row[2]).as("what moved").matches("[\\d,]+ KB of shuffle blocks, [1-9]\\d* blocks");
        assertThat(row[3]).isEqualTo(row[1].startsWith("verbs") ? "RDMA READ" : "emulated READ (tcp)");
        assertThat(row[4]).isEqualTo("OK, counts add up");
    }
}
