package io.rdma4j.it.bench;

import org.junit.jupiter.api.Test;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.options.OptionsBuilder;

import java.util.Locale;

import static io.rdma4j.it.bench.JmhRuns.percentile;
import static io.rdma4j.it.bench.JmhRuns.score;

/**
 * The tcp provider against plain Java NIO doing the same transfers on loopback, every figure and its ratio from
 * one run: 64 B read latency, 1 MiB read throughput with 1 and 8 in flight, 64 connections with 16 reads each in
 * flight, and request/reply round trips. Run with {@code ./mvnw -B -Pbench -pl it/bench-transport -am verify
 * -Dtest=TransportBenchmark -Dsurefire.failIfNoSpecifiedTests=false} (2-4 minutes on 2 cores, one JVM fork per
 * benchmark; the table also lands in {@code target/bench-results.txt}), or {@code main} on the test class path.
 */
class TransportBenchmark {

    @Test
    void tcpProviderAgainstPlainNio() throws Exception {
        run();
    }

    public static void main(String[] args) throws Exception {
        run();
    }

    static String run() throws Exception {
        JmhRuns runs = JmhRuns.run("rdma4j tcp provider vs plain NIO", new OptionsBuilder()
                .include(JmhRuns.all(SmallReadLatency.class))
                .include(JmhRuns.all(LargeReadThroughput.class))
                .include(JmhRuns.all(ManyConnectionsThroughput.class))
                .include(JmhRuns.all(RequestRoundTrip.class)));
        runs.heading("rdma4j", "NIO");

        RunResult nioSmall = runs.result(SmallReadLatency.class, "nio");
        for (String way : new String[] {"readAndWait", "read().get()"}) {
            RunResult tcp = runs.result(SmallReadLatency.class, way.equals("readAndWait") ? "tcpReadAndWait" : "tcpReadGet");
            runs.row("64 B read latency, " + way + ", median", percentile(tcp, 50), percentile(nioSmall, 50), "us");
            runs.row("64 B read latency, " + way + ", p99", percentile(tcp, 99), percentile(nioSmall, 99), "us");
        }
        for (int depth : new int[] {1, 8}) {
            // one operation is a batch of `depth` reads of 1 MiB
            runs.row("1 MiB read throughput, " + depth + " in flight",
                    depth * score(runs.result(LargeReadThroughput.class, "tcp", "depth=" + depth)),
                    depth * score(runs.result(LargeReadThroughput.class, "nio", "depth=" + depth)), "MiB/s");
        }
        runs.row(String.format(Locale.ROOT, "%d connections x %d reads of %d KiB in flight, aggregate", ManyConnectionsThroughput.CONNECTIONS,
                        ManyConnectionsThroughput.IN_FLIGHT, ManyConnectionsThroughput.READ / 1024),
                score(runs.result(ManyConnectionsThroughput.class, "tcp")),
                score(runs.result(ManyConnectionsThroughput.class, "nio")), "MiB/s");
        RunResult tcpRequest = runs.result(RequestRoundTrip.class, "tcpRequest", "size=64");
        RunResult nioRequest = runs.result(RequestRoundTrip.class, "nio", "size=64");
        runs.row("request/reply of 64 B, median", percentile(tcpRequest, 50), percentile(nioRequest, 50), "us");
        runs.row("request/reply of 64 B, p99", percentile(tcpRequest, 99), percentile(nioRequest, 99), "us");
        return runs.report("bench-results.txt");
    }
}
