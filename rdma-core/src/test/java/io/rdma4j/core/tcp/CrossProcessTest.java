package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.ChildClassPath;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** Two JVMs on loopback: this one reads what a child process published, and survives the child dying. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CrossProcessTest {

    private Process child;

    private record Published(InetSocketAddress address, RegionDescriptor descriptor) {
    }

    private Published startChild(long size) throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow(() -> new AssertionError("cannot find the java binary"));
        child = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-Xmx256m",
                "-cp", ChildClassPath.ofThisTestRun(), CrossProcessPeer.class.getName(), Long.toString(size))
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        String line;
        while ((line = out.readLine()) != null && !line.startsWith("READY ")) {
            // skip anything else the child prints
        }
        assertThat(line).as("child announced its region").isNotNull();
        String[] parts = line.split(" ");
        return new Published(new InetSocketAddress("127.0.0.1", Integer.parseInt(parts[1])),
                RegionDescriptor.fromBytes(HexFormat.of().parseHex(parts[2])));
    }

    @AfterEach
    void stopChild() throws Exception {
        if (child != null) {
            child.destroyForcibly();
            child.waitFor(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void readsARegionPublishedByAnotherProcess() throws Exception {
        long size = 3L << 20;
        Published p = startChild(size);
        assertThat(p.descriptor().length()).isEqualTo(size);
        try (Arena arena = Arena.ofShared();
             RdmaTransport transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build())) {
            RegisteredRegion sink = transport.register(arena.allocate(size), Access.readSink());
            RdmaConnection c = transport.connect(p.address()).get(30, TimeUnit.SECONDS);
            c.read(p.descriptor(), 0, sink.segment()).get(30, TimeUnit.SECONDS);
            for (long i = 0; i < size; i++) {
                if (sink.segment().get(ValueLayout.JAVA_BYTE, i) != CrossProcessPeer.pattern(i)) {
                    throw new AssertionError("byte " + i + " differs from what the child published");
                }
            }
            assertThat(transport.metrics().snapshot(io.rdma4j.core.metrics.OperationType.READ).bytes()).isEqualTo(size);
        }
    }

    @Test
    void childKilledMidReadFailsReadsWithConnectionClosed() throws Exception {
        long size = 32L << 20;
        Published p = startChild(size);
        try (Arena arena = Arena.ofShared();
             RdmaTransport transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build())) {
            RegisteredRegion sink = transport.register(arena.allocate(size), Access.readSink());
            RdmaConnection c = transport.connect(p.address()).get(30, TimeUnit.SECONDS);
            // The connection works: a small read completes.
            c.read(p.descriptor(), 0, sink.segment().asSlice(0, 4096)).get(30, TimeUnit.SECONDS);
            // Then 2 GiB of reads are in flight when the child dies. (Waiting for one of them first would not
            // do: the responder interleaves chunks of all requests, so they finish at nearly the same time.)
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                reads.add(c.read(p.descriptor(), 0, sink.segment()));
            }
            child.destroyForcibly();
            int closed = 0;
            for (CompletableFuture<Void> f : reads) {
                try {
                    f.get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    assertThat(e.getCause()).isInstanceOf(ConnectionClosedException.class)
                            .hasMessageContaining(String.valueOf(p.address().getPort()));
                    closed++;
                }
            }
            assertThat(closed).as("reads cut off by the child's death").isPositive();
            assertThat(c.isOpen()).isFalse();
        }
    }
}
