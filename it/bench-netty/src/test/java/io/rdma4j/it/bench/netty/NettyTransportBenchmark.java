package io.rdma4j.it.bench.netty;

import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * rdma4j's Netty transport against Netty's NIO and epoll transports in one JVM, round after round, each round
 * running every transport once in turn (this machine is shared: interleaving puts each rdma4j figure next to a
 * baseline measured under the same load). Two workloads: 64 B request/response between two event loops (a round
 * trip per exchange, the next request sent from the read callback), reported as p50 and p99 over all rounds; and
 * 1 MiB buffers streamed while the channel is writable, reported as the median of the per-round throughput ratios.
 *
 * <p>Run with {@code ./mvnw -B -Pbench -pl it/bench-netty -am verify -Dtest=NettyTransportBenchmark
 * -Dsurefire.failIfNoSpecifiedTests=false} (about 2 min on 2 cores; {@code -Dbench.rounds},
 * {@code -Dbench.pings} per round, {@code -Dbench.slice-millis} of streaming per round, {@code -Dbench.provider}:
 * tcp by default; {@code -Dbench.rdma.max-inbox-bytes} sets rdma4j's {@code tcp.max-inbox-bytes}, so that a small
 * inbox holds the reading back at its bound). The table also lands in {@code target/bench-netty-results.txt}. Over rxe0 the lab runs it:
 * {@code ./mvnw -B -Pbench -pl it/lab -am verify -Dtest=NettyBenchmarkLabTest -Dsurefire.failIfNoSpecifiedTests=false}.
 */
public class NettyTransportBenchmark {

    private static final int WARM_UP_ROUNDS = 3;

    @Test
    void rdma4jAgainstNioAndEpoll() throws Exception {
        String provider = System.getProperty("bench.provider", "tcp");
        TransportConfig.Builder config = TransportConfig.builder().provider(provider);
        String inbox = System.getProperty("bench.rdma.max-inbox-bytes");
        if (inbox != null) {
            config.providerOption("tcp.max-inbox-bytes", inbox); // a small inbox: reading held back at its bound
        }
        String table = run(config.build(), InetAddress.getLoopbackAddress(),
                Integer.getInteger("bench.rounds", 12), Integer.getInteger("bench.pings", 2000),
                Integer.getInteger("bench.slice-millis", 400));
        System.out.print(table);
        Files.writeString(Path.of("target", "bench-netty-results.txt"), table);
    }

    /**
     * Runs the rounds: rdma4j's transport on {@code config}, NIO and epoll, every server listening on {@code address};
     * returns the table. The soft-RDMA lab runs it over rxe0 ({@code NettyBenchmarkGuestTest}).
     */
    public static String run(TransportConfig config, InetAddress address, int rounds, int pings, int sliceMillis)
            throws Exception {
        long slice = sliceMillis * 1_000_000L;
        List<Side> sides = new ArrayList<>();
        try {
            sides.add(Side.rdma4j(config, address));
            sides.add(Side.nio(address));
            Side epoll = Side.epoll(address);
            if (epoll != null) {
                sides.add(epoll);
            }
            int n = sides.size();
            long[][] latencies = new long[n][rounds * pings];
            double[][] throughput = new double[n][rounds];
            for (int r = -WARM_UP_ROUNDS; r < rounds; r++) {
                for (int s = 0; s < n; s++) {
                    long[] samples = sides.get(s).pingPong(pings);
                    if (r >= 0) {
                        System.arraycopy(samples, 0, latencies[s], r * pings, pings);
                    }
                }
                for (int s = 0; s < n; s++) {
                    double rate = sides.get(s).stream(slice);
                    if (r >= 0) {
                        throughput[s][r] = rate;
                    }
                }
            }
            return table(sides, latencies, throughput, rounds, pings, slice);
        } finally {
            for (Side side : sides) {
                side.close();
            }
        }
    }

    private static String table(List<Side> sides, long[][] latencies, double[][] throughput, int rounds, int pings, long slice) {
        StringBuilder out = new StringBuilder(String.format(Locale.ROOT,
                "Netty transports, %d rounds of %d 64 B round trips and %d ms of 1 MiB streaming each, interleaved; %d cores%n",
                rounds, pings, slice / 1_000_000, Runtime.getRuntime().availableProcessors()));
        out.append(String.format(Locale.ROOT, "%-16s %10s %10s %14s%n", "transport", "p50 us", "p99 us", "MiB/s (median)"));
        double[][] p = new double[sides.size()][];
        double[] mibs = new double[sides.size()];
        for (int s = 0; s < sides.size(); s++) {
            long[] sorted = latencies[s].clone();
            Arrays.sort(sorted);
            p[s] = new double[] {sorted[sorted.length / 2] / 1e3, sorted[(int) (sorted.length * 0.99)] / 1e3};
            mibs[s] = median(throughput[s]) / (1 << 20);
            out.append(String.format(Locale.ROOT, "%-16s %10.1f %10.1f %14.0f%n", sides.get(s).name, p[s][0], p[s][1], mibs[s]));
        }
        for (int base = 1; base < sides.size(); base++) {
            double[] ratios = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                ratios[r] = throughput[0][r] / throughput[base][r];
            }
            double[] sortedRatios = ratios.clone();
            Arrays.sort(sortedRatios);
            out.append(String.format(Locale.ROOT,
                    "%s / %s: p50 latency %.2fx, p99 latency %.2fx, 1 MiB throughput %.2fx (median of rounds; q1-q3 %.2f-%.2f)%n",
                    sides.get(0).name, sides.get(base).name, p[0][0] / p[base][0], p[0][1] / p[base][1],
                    median(ratios), sortedRatios[rounds / 4], sortedRatios[(3 * rounds) / 4]));
        }
        return out.toString();
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    /** For a machine without Maven: the same run from a class path. */
    public static void main(String[] args) throws Exception {
        new NettyTransportBenchmark().rdma4jAgainstNioAndEpoll();
    }
}
