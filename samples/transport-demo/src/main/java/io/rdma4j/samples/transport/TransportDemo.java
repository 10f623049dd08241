package io.rdma4j.samples.transport;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The smallest complete rdma4j program: a "server" transport publishes a region, a "client" transport
 * learns its descriptor over send/receive and reads it with one-sided reads, without the server's
 * application touching the data path.
 */
public final class TransportDemo {

    private static final long REGION_BYTES = 16L << 20;

    public static void main(String[] args) throws Exception {
        TransportConfig config = TransportConfig.fromProperties(System.getProperties(), "rdma4j.");
        try (RdmaTransport server = RdmaTransport.open(config);
             RdmaTransport client = RdmaTransport.open(config);
             Arena arena = Arena.ofShared()) {
            System.out.println("[transport-demo] provider: " + server.selection());

            MemorySegment data = arena.allocate(REGION_BYTES, 64);
            for (long i = 0; i < REGION_BYTES; i += 8) {
                data.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 31);
            }
            RegisteredRegion published = server.register(data, Access.remoteRead());
            RdmaListener listener = server.listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0),
                    accepted -> accepted.send(published.descriptor().toBytes()));

            try (RdmaConnection connection = client.connect(listener.localAddress()).get(30, TimeUnit.SECONDS);
                 RegisteredBufferPool pool = client.createBufferPool(PoolConfig.defaults())) {
                RegionDescriptor remote = RegionDescriptor.fromBytes(connection.receive().get(30, TimeUnit.SECONDS));
                System.out.println("[transport-demo] got " + remote);

                long start = System.nanoTime();
                try (PooledBuffer sink = pool.acquire(REGION_BYTES)) {
                    connection.read(remote, 0, sink.segment()).get(60, TimeUnit.SECONDS);
                    long mismatch = sink.segment().mismatch(data);
                    if (mismatch != -1) {
                        throw new IllegalStateException("data differs at byte " + mismatch);
                    }
                }
                double ms = (System.nanoTime() - start) / 1e6;
                System.out.printf("[transport-demo] one-sided read of %d MiB verified in %.1f ms (%.0f MB/s)%n",
                        REGION_BYTES >> 20, ms, REGION_BYTES / 1e3 / ms);

                connection.send(ByteBuffer.wrap("thanks".getBytes(StandardCharsets.UTF_8))).get(30, TimeUnit.SECONDS);
                var reads = client.metrics().snapshot(OperationType.READ);
                System.out.println("[transport-demo] client metrics: reads=" + reads.count() + " bytes=" + reads.bytes()
                        + "; server served " + server.metrics().servedBytes(OperationType.READ) + " bytes");
                report(server.selection().toString(), (REGION_BYTES >> 20) + " MiB region, " + reads.count() + " read",
                        readPath(server.selection().provider()), "OK, bytes identical");
            }
            published.close();
            listener.close();
        }
        System.out.println("[transport-demo] OK");
    }

    /** Only verbs does RDMA; the tcp provider carries the same one-sided READ in software. */
    static String readPath(String provider) {
        return "verbs".equals(provider) ? "RDMA READ" : "emulated READ (" + provider + ")";
    }

    /** This demo's row of the table that {@code -Pdemo} ends with (samples/demo-summary), when run there. */
    static void report(String... columns) throws java.io.IOException {
        String file = System.getProperty("demo.result");
        if (file != null) {
            Files.writeString(Path.of(file), "transport-demo\t" + String.join("\t", columns));
        }
    }
}
