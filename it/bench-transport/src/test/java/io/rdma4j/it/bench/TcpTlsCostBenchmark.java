package io.rdma4j.it.bench;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The cost of TLS on the tcp provider: the {@link TcpVsNioBenchmark} transfers (64 B read latency, 1 MiB read
 * throughput with 1 and 8 in flight) over plain tcp and over mutual TLS 1.3 with a shared secret, same run, same
 * machine. Run with {@code ./mvnw -B -pl it/bench-transport -am -Pbench verify -Dtest=TcpTlsCostBenchmark
 * -Dsurefire.failIfNoSpecifiedTests=false}.
 */
class TcpTlsCostBenchmark {

    private static final String PASSWORD = "changeit";

    @Test
    void tlsAgainstPlainTcp() throws Exception {
        Path dir = Files.createTempDirectory("rdma4j-bench-tls");
        Path keys = dir.resolve("bench.p12");
        Path trust = dir.resolve("trust.p12");
        Path cer = dir.resolve("bench.cer");
        keytool("-genkeypair", "-alias", "bench", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=bench",
                "-validity", "2", "-storetype", "PKCS12", "-keystore", keys.toString(), "-storepass", PASSWORD);
        keytool("-exportcert", "-alias", "bench", "-keystore", keys.toString(), "-storepass", PASSWORD, "-file", cer.toString());
        keytool("-importcert", "-noprompt", "-alias", "bench", "-file", cer.toString(), "-storetype", "PKCS12",
                "-keystore", trust.toString(), "-storepass", PASSWORD);
        TransportConfig plain = TransportConfig.builder().provider("tcp").build();
        TransportConfig tls = plain.toBuilder().sharedSecret("bench secret of 16+ bytes")
                .providerOption("tcp.tls", "true")
                .providerOption("tcp.tls.key-store", keys.toString()).providerOption("tcp.tls.key-store-password", PASSWORD)
                .providerOption("tcp.tls.trust-store", trust.toString()).providerOption("tcp.tls.trust-store-password", PASSWORD)
                .build();
        double[] p = measure(plain);
        double[] t = measure(tls);
        String report = String.format(Locale.ROOT, "rdma4j tcp provider, plain vs mutual TLS 1.3 + shared secret, loopback,"
                        + " %d cores, %s%n"
                        + "64 B read latency median  plain %7.1f us  tls %7.1f us  ratio tls/plain %.2fx%n"
                        + "1 MiB reads, 1 in flight  plain %8.1f MiB/s  tls %8.1f MiB/s  ratio tls/plain %.2f%n"
                        + "1 MiB reads, 8 in flight  plain %8.1f MiB/s  tls %8.1f MiB/s  ratio tls/plain %.2f%n",
                Runtime.getRuntime().availableProcessors(), System.getProperty("java.vm.version"),
                p[0], t[0], t[0] / p[0], p[1], t[1], t[1] / p[1], p[2], t[2], t[2] / p[2]);
        System.out.println(report);
        Path out = Path.of("target", "bench-tls-results.txt");
        Files.createDirectories(out.getParent());
        Files.writeString(out, report);
    }

    /** Median 64 B latency (us), 1 MiB throughput at depth 1 and 8 (MiB/s). */
    private static double[] measure(TransportConfig config) throws Exception {
        long region = TcpVsNioBenchmark.REGION;
        int large = TcpVsNioBenchmark.LARGE;
        try (Arena arena = Arena.ofShared();
             RdmaTransport server = RdmaTransport.open(config);
             RdmaTransport client = RdmaTransport.open(config)) {
            MemorySegment data = arena.allocate(region, 4096);
            for (long i = 0; i < region; i += 8) {
                data.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
            }
            RegisteredRegion published = server.register(data, Access.remoteRead());
            RdmaListener listener = server.listen(new InetSocketAddress("127.0.0.1", 0));
            RegisteredRegion sink = client.register(arena.allocate(8L * large, 4096), Access.readSink());
            RdmaConnection connection = client.connect(listener.localAddress()).get();
            RegionDescriptor remote = published.descriptor();
            TcpVsNioBenchmark.Reader reader = (offset, length, depth) -> {
                CompletableFuture<?>[] fs = new CompletableFuture<?>[depth];
                for (int i = 0; i < depth; i++) {
                    fs[i] = connection.read(remote, offset + (long) i * length, sink.segment().asSlice((long) i * length, length));
                }
                CompletableFuture.allOf(fs).get();
            };
            reader.readBatch(4096, large, 1);
            assertThat(sink.segment().asSlice(0, large).mismatch(data.asSlice(4096, large))).isEqualTo(-1);
            return new double[] {TcpVsNioBenchmark.latency(reader).medianMicros(), TcpVsNioBenchmark.throughput(reader, 1),
                    TcpVsNioBenchmark.throughput(reader, 8)};
        }
    }

    private static void keytool(String... args) throws Exception {
        Path java = Path.of(ProcessHandle.current().info().command().orElseThrow());
        List<String> command = new ArrayList<>(List.of(java.resolveSibling("keytool").toString()));
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertThat(p.waitFor()).as("keytool: " + out).isZero();
    }
}
