package io.rdma4j.it.bench;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;

/**
 * The tcp provider (plain and TLS) and plain NIO interleaved in one JVM, slice after slice: where other processes
 * load the machine, JMH's forks run minutes apart under different loads, while here every slice of the provider has
 * a NIO slice next to it. Prints, per workload, the median of the per-round throughput ratios with its quartiles
 * (higher is better for the provider). Run with {@code ./mvnw -B -Pbench -pl it/bench-transport -am verify
 * -Dtest=PairedProbe -Dsurefire.failIfNoSpecifiedTests=false} (about 2 min; {@code -Dprobe.rounds},
 * {@code -Dprobe.slice-millis}); the table also lands in {@code target/bench-probe-results.txt}.
 */
class PairedProbe {

    private static final int WARM_UP_ROUNDS = 3;

    private interface Op {
        void run() throws Exception;
    }

    private long offset;

    @Test
    void tcpProviderAgainstPlainNioInterleaved() throws Exception {
        run(Integer.getInteger("probe.rounds", 15), Integer.getInteger("probe.slice-millis", 250));
    }

    public static void main(String[] args) throws Exception {
        new PairedProbe().run(args.length > 0 ? Integer.parseInt(args[0]) : 15, args.length > 1 ? Integer.parseInt(args[1]) : 250);
    }

    void run(int rounds, int sliceMillis) throws Exception {
        NioSide nio = new NioSide();
        nio.open();
        TcpSide plain = tcpSide("plain");
        TcpSide tls = tcpSide("tls");
        StringBuilder table = new StringBuilder(String.format(Locale.ROOT,
                "tcp provider / plain NIO throughput, interleaved slices of %d ms, %d rounds, %d cores; median (q1-q3)%n",
                sliceMillis, rounds, Runtime.getRuntime().availableProcessors()));
        table.append(String.format(Locale.ROOT, "%-34s %18s %18s%n", "", "plain/NIO", "TLS/NIO"));
        try {
            for (String workload : new String[] {"64 B readAndWait", "1 MiB read, 1 in flight", "1 MiB read, 8 in flight"}) {
                offset = 0; // each workload steps through the region from its start, by its own transfer size
                double[] plainRatios = new double[rounds];
                double[] tlsRatios = new double[rounds];
                long slice = sliceMillis * 1_000_000L;
                for (int r = -WARM_UP_ROUNDS; r < rounds; r++) {
                    double base = rate(slice, nioOp(nio, workload));
                    double p = rate(slice, tcpOp(plain, workload));
                    double t = rate(slice, tcpOp(tls, workload));
                    if (r >= 0) {
                        plainRatios[r] = p / base;
                        tlsRatios[r] = t / base;
                    }
                }
                table.append(String.format(Locale.ROOT, "%-34s %18s %18s%n", workload, quartiles(plainRatios), quartiles(tlsRatios)));
            }
        } finally {
            tls.close();
            plain.close();
            nio.close();
        }
        String text = table.toString();
        System.out.println(text);
        Path out = Path.of("target", "bench-probe-results.txt");
        Files.createDirectories(out.getParent());
        Files.writeString(out, text);
    }

    private static TcpSide tcpSide(String security) throws Exception {
        TcpSide side = new TcpSide();
        side.security = security;
        side.open();
        return side;
    }

    private Op nioOp(NioSide nio, String workload) {
        return switch (workload) {
            case "64 B readAndWait" -> () -> nio.client.readBatch(next(Transfers.STRIDE), Transfers.SMALL, 1);
            case "1 MiB read, 1 in flight" -> () -> nio.client.readBatch(next(Transfers.LARGE), Transfers.LARGE, 1);
            default -> () -> nio.client.readBatch(next(8L * Transfers.LARGE), Transfers.LARGE, 8);
        };
    }

    private Op tcpOp(TcpSide tcp, String workload) {
        return switch (workload) {
            case "64 B readAndWait" -> () -> tcp.connection.readAndWait(tcp.remote, next(Transfers.STRIDE),
                    tcp.sink.segment().asSlice(0, Transfers.SMALL));
            case "1 MiB read, 1 in flight" -> () -> tcp.readBatch(tcp.connection, tcp.sink.segment(), next(Transfers.LARGE), Transfers.LARGE, 1);
            default -> () -> tcp.readBatch(tcp.connection, tcp.sink.segment(), next(8L * Transfers.LARGE), Transfers.LARGE, 8);
        };
    }

    private long next(long step) {
        long at = offset;
        offset = Transfers.next(offset, step);
        return at;
    }

    /** Operations per second over at least {@code sliceNanos}. */
    private static double rate(long sliceNanos, Op op) throws Exception {
        long start = System.nanoTime();
        long n = 0;
        long now;
        do {
            op.run();
            n++;
            now = System.nanoTime();
        } while (now - start < sliceNanos);
        return n / ((now - start) / 1e9);
    }

    private static String quartiles(double[] ratios) {
        double[] sorted = ratios.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return String.format(Locale.ROOT, "%.2fx (%.2f-%.2f)", sorted[n / 2], sorted[n / 4], sorted[(3 * n) / 4]);
    }
}
