package io.rdma4j.it.bench;

import org.junit.jupiter.api.Test;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.options.OptionsBuilder;

import static io.rdma4j.it.bench.JmhRuns.percentile;
import static io.rdma4j.it.bench.JmhRuns.score;

/**
 * The cost of TLS on the tcp provider: the read benchmarks of {@link TransportBenchmark} over plain tcp and over
 * mutual TLS 1.3 with a shared secret, in one run. Run with {@code ./mvnw -B -Pbench -pl it/bench-transport -am
 * verify -Dtest=TcpTlsCostBenchmark -Dsurefire.failIfNoSpecifiedTests=false} (the table also lands in
 * {@code target/bench-tls-results.txt}), or {@code main} on the test class path.
 */
class TcpTlsCostBenchmark {

    @Test
    void tlsAgainstPlainTcp() throws Exception {
        run();
    }

    public static void main(String[] args) throws Exception {
        run();
    }

    static void run() throws Exception {
        JmhRuns runs = JmhRuns.run("rdma4j tcp provider, mutual TLS 1.3 + shared secret vs plain", new OptionsBuilder()
                .include(JmhRuns.method(SmallReadLatency.class, "tcpReadAndWait"))
                .include(JmhRuns.method(LargeReadThroughput.class, "tcp"))
                .param("security", "plain", "tls"));
        runs.heading("tls", "plain");
        RunResult plain = runs.result(SmallReadLatency.class, "tcpReadAndWait", "security=plain");
        RunResult tls = runs.result(SmallReadLatency.class, "tcpReadAndWait", "security=tls");
        runs.row("64 B read latency, readAndWait, median", percentile(tls, 50), percentile(plain, 50), "us");
        runs.row("64 B read latency, readAndWait, p99", percentile(tls, 99), percentile(plain, 99), "us");
        for (int depth : new int[] {1, 8}) {
            runs.row("1 MiB read throughput, " + depth + " in flight",
                    depth * score(runs.result(LargeReadThroughput.class, "tcp", "depth=" + depth, "security=tls")),
                    depth * score(runs.result(LargeReadThroughput.class, "tcp", "depth=" + depth, "security=plain")), "MiB/s");
        }
        runs.report("bench-tls-results.txt");
    }
}
