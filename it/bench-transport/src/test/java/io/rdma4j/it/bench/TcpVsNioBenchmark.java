package io.rdma4j.it.bench;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * One run, same machine, same transfers: the tcp provider's one-sided reads against the simplest
 * equivalent in plain Java NIO (a blocking SocketChannel request/response server writing from a direct
 * buffer). Latency of 64 B reads (one in flight: median, p99) and throughput of 1 MiB reads (1 and 8
 * in flight). Warm-up first; each phase runs for a fixed time. Not part of the normal build: run with
 * {@code ./mvnw -B -pl it/bench-transport -am -Pbench verify -Dtest=TcpVsNioBenchmark -Dsurefire.failIfNoSpecifiedTests=false} (or {@code main} on the test class path).
 */
class TcpVsNioBenchmark {

    static final long REGION = 64L << 20;
    private static final int SMALL = 64;
    static final int LARGE = 1 << 20;
    private static final long WARMUP_NANOS = 2_000_000_000L;
    private static final long MEASURE_NANOS = 4_000_000_000L;

    /** One side's way of reading {@code length} bytes at {@code offset} into slot {@code slot} of its sink, {@code depth} at once. */
    interface Reader {
        void readBatch(long offset, int length, int depth) throws Exception;
    }

    record Latency(double medianMicros, double p99Micros, long samples) {
    }

    @Test
    void tcpProviderAgainstPlainNio() throws Exception {
        String report = run();
        System.out.println(report);
        Path out = Path.of("target", "bench-results.txt");
        Files.createDirectories(out.getParent());
        Files.writeString(out, report);
    }

    public static void main(String[] args) throws Exception {
        System.out.println(run());
    }

    static String run() throws Exception {
        try (Arena arena = Arena.ofShared();
             RdmaTransport server = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             RdmaTransport client = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             NioServer nio = new NioServer(arena)) {
            MemorySegment data = arena.allocate(REGION, 4096);
            for (long i = 0; i < REGION; i += 8) {
                data.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
            }
            RegisteredRegion published = server.register(data, Access.remoteRead());
            RdmaListener listener = server.listen(new InetSocketAddress("127.0.0.1", 0));
            RegisteredRegion sink = client.register(arena.allocate(8L * LARGE, 4096), Access.readSink());
            RdmaConnection connection = client.connect(listener.localAddress()).get();
            RegionDescriptor remote = published.descriptor();

            Reader tcp = (offset, length, depth) -> {
                if (depth == 1) {
                    connection.read(remote, offset, sink.segment().asSlice(0, length)).get();
                    return;
                }
                CompletableFuture<?>[] fs = new CompletableFuture<?>[depth];
                for (int i = 0; i < depth; i++) {
                    fs[i] = connection.read(remote, offset + (long) i * length, sink.segment().asSlice((long) i * length, length));
                }
                CompletableFuture.allOf(fs).get();
            };
            // correctness once, so the numbers are about a transfer that works
            tcp.readBatch(4096, LARGE, 1);
            assertThat(sink.segment().asSlice(0, LARGE).mismatch(data.asSlice(4096, LARGE))).isEqualTo(-1);

            MemorySegment nioSink = arena.allocate(8L * LARGE, 4096);
            NioClient nioClient = new NioClient(nio.address(), nioSink);
            Reader plain = nioClient::readBatch;
            plain.readBatch(4096, LARGE, 1);
            assertThat(nioSink.asSlice(0, LARGE).mismatch(nio.data.asSlice(4096, LARGE))).isEqualTo(-1);

            Latency tcpLatency = latency(tcp);
            Latency nioLatency = latency(plain);
            double tcp1 = throughput(tcp, 1);
            double nio1 = throughput(plain, 1);
            double tcp8 = throughput(tcp, 8);
            double nio8 = throughput(plain, 8);
            nioClient.close();

            StringBuilder r = new StringBuilder();
            r.append(String.format(Locale.ROOT, "rdma4j tcp provider vs plain NIO, loopback, %d cores, %s%n",
                    Runtime.getRuntime().availableProcessors(), System.getProperty("java.vm.version")));
            r.append(String.format(Locale.ROOT, "64 B read latency   tcp: median %7.1f us  p99 %7.1f us  (%d samples)%n",
                    tcpLatency.medianMicros, tcpLatency.p99Micros, tcpLatency.samples));
            r.append(String.format(Locale.ROOT, "64 B read latency   nio: median %7.1f us  p99 %7.1f us  (%d samples)%n",
                    nioLatency.medianMicros, nioLatency.p99Micros, nioLatency.samples));
            r.append(String.format(Locale.ROOT, "  ratio tcp/nio: median %.2fx  p99 %.2fx%n",
                    tcpLatency.medianMicros / nioLatency.medianMicros, tcpLatency.p99Micros / nioLatency.p99Micros));
            r.append(String.format(Locale.ROOT, "1 MiB read throughput, 1 in flight  tcp: %8.1f MiB/s  nio: %8.1f MiB/s  ratio %.2f%n",
                    tcp1, nio1, tcp1 / nio1));
            r.append(String.format(Locale.ROOT, "1 MiB read throughput, 8 in flight  tcp: %8.1f MiB/s  nio: %8.1f MiB/s  ratio %.2f%n",
                    tcp8, nio8, tcp8 / nio8));
            return r.toString();
        }
    }

    static Latency latency(Reader reader) throws Exception {
        long end = System.nanoTime() + WARMUP_NANOS;
        long offset = 0;
        while (System.nanoTime() < end) {
            reader.readBatch(offset, SMALL, 1);
            offset = (offset + 4096) % REGION;
        }
        long[] samples = new long[1 << 20];
        int n = 0;
        end = System.nanoTime() + MEASURE_NANOS;
        while (n < samples.length) {
            long start = System.nanoTime();
            if (start > end) {
                break;
            }
            reader.readBatch(offset, SMALL, 1);
            samples[n++] = System.nanoTime() - start;
            offset = (offset + 4096) % REGION;
        }
        long[] sorted = Arrays.copyOf(samples, n);
        Arrays.sort(sorted);
        return new Latency(sorted[n / 2] / 1000.0, sorted[(int) (n * 0.99)] / 1000.0, n);
    }

    /** MiB/s of {@link #LARGE} reads, {@code depth} in flight. */
    static double throughput(Reader reader, int depth) throws Exception {
        long span = REGION - (long) depth * LARGE;
        long offset = 0;
        long end = System.nanoTime() + WARMUP_NANOS / 2;
        while (System.nanoTime() < end) {
            reader.readBatch(offset, LARGE, depth);
            offset = (offset + (long) depth * LARGE) % span;
        }
        long bytes = 0;
        long start = System.nanoTime();
        end = start + MEASURE_NANOS / 2;
        long now;
        while ((now = System.nanoTime()) < end) {
            reader.readBatch(offset, LARGE, depth);
            bytes += (long) depth * LARGE;
            offset = (offset + (long) depth * LARGE) % span;
        }
        return bytes / (1024.0 * 1024.0) / ((now - start) / 1e9);
    }

    /** Plain NIO: request = offset(8) length(8); response = the bytes, written from a direct buffer. */
    private static final class NioServer implements AutoCloseable {
        final MemorySegment data;
        final ServerSocketChannel server;
        final List<SocketChannel> accepted = new ArrayList<>();
        final Thread acceptor;

        NioServer(Arena arena) throws IOException {
            data = arena.allocate(REGION, 4096);
            for (long i = 0; i < REGION; i += 8) {
                data.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
            }
            server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
            acceptor = Thread.ofPlatform().daemon().name("nio-bench-accept").start(this::acceptLoop);
        }

        InetSocketAddress address() throws IOException {
            return (InetSocketAddress) server.getLocalAddress();
        }

        private void acceptLoop() {
            try {
                while (true) {
                    SocketChannel c = server.accept();
                    c.setOption(StandardSocketOptions.TCP_NODELAY, true);
                    synchronized (accepted) {
                        accepted.add(c);
                    }
                    Thread.ofPlatform().daemon().name("nio-bench-serve").start(() -> serve(c));
                }
            } catch (IOException closed) {
                // server closed
            }
        }

        private void serve(SocketChannel c) {
            ByteBuffer request = ByteBuffer.allocateDirect(16);
            try {
                while (true) {
                    request.clear();
                    while (request.hasRemaining()) {
                        if (c.read(request) < 0) {
                            return;
                        }
                    }
                    ByteBuffer response = data.asSlice(request.getLong(0), request.getLong(8)).asByteBuffer();
                    while (response.hasRemaining()) {
                        c.write(response);
                    }
                }
            } catch (IOException closed) {
                // client gone
            }
        }

        @Override
        public void close() throws IOException {
            server.close();
            synchronized (accepted) {
                for (SocketChannel c : accepted) {
                    c.close();
                }
            }
        }
    }

    private static final class NioClient implements AutoCloseable {
        final SocketChannel channel;
        final MemorySegment sink;
        final ByteBuffer requests = ByteBuffer.allocateDirect(16 * 8);

        NioClient(InetSocketAddress address, MemorySegment sink) throws IOException {
            channel = SocketChannel.open(address);
            channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
            this.sink = sink;
        }

        void readBatch(long offset, int length, int depth) throws IOException {
            requests.clear();
            for (int i = 0; i < depth; i++) {
                requests.putLong(offset + (long) i * length).putLong(length);
            }
            requests.flip();
            while (requests.hasRemaining()) {
                channel.write(requests);
            }
            ByteBuffer into = sink.asSlice(0, (long) depth * length).asByteBuffer();
            while (into.hasRemaining()) {
                if (channel.read(into) < 0) {
                    throw new IOException("server closed");
                }
            }
        }

        @Override
        public void close() throws IOException {
            channel.close();
        }
    }
}
