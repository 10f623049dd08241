package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * Verbs messaging at cluster scale: the transport's receive queue and message slots are shared, so memory pinned per
 * idle connection is a few slots, not a receive depth of full-size messages. The serving process runs without
 * {@code CAP_IPC_LOCK} (the lab runs as root, whose capability ignores the limit) under Debian's default
 * {@code RLIMIT_MEMLOCK} of 8 MiB: it serves 64 connections there, then, its soft limit raised to 32 MiB, 1,024, each of
 * which does a READ and a request. {@code VmPin} of both processes is read before and after.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class ConnectionScaleGuestTest {

    private static final int CONNECTIONS = 1024;
    private static final int UNDER_DEFAULT_LIMIT = 64;
    private static final long DEFAULT_MEMLOCK_KB = 8 * 1024;
    private static final long RAISED_MEMLOCK_KB = 32 * 1024;
    /** Connects, READs and requests in flight at once. */
    private static final int BATCH = 16;
    private static final long WAIT = 120;
    private static final long CAP_IPC_LOCK = 1L << 14;

    private final LabDevice device = LabDevice.current();

    @Test
    void sixtyFourConnectionsUnderEightMebibytesOfMemlockThenAThousandUnderThirtyTwo() throws Exception {
        // the emulated CPU sets up one connection in about 0.1 s: a batch queued at the listener needs longer
        TransportConfig config = VerbsLab.config(device).toBuilder().connectTimeout(Duration.ofSeconds(WAIT)).build();
        try (Peer peer = Peer.start(device); Arena arena = Arena.ofShared(); RdmaTransport client = RdmaTransport.open(config)) {
            Peer.Status before = peer.status();
            assertThat(before.capEff() & CAP_IPC_LOCK).as("the server's effective capabilities %x lack CAP_IPC_LOCK",
                    before.capEff()).isZero();
            assertThat(peer.command("REGISTER " + (16L << 20), "RE")).as("the limit applies: 16 MiB cannot be registered")
                    .startsWith("REFUSED").contains("RLIMIT_MEMLOCK");
            RegisteredRegion sink = client.register(arena.allocate(64L * CONNECTIONS, 64), Access.readSink());
            long clientBefore = Long.parseLong(ScalePeerProcess.status("VmPin"));

            List<RdmaConnection> connections = new ArrayList<>();
            connectReadAndRequest(client, peer, sink.segment(), 0, UNDER_DEFAULT_LIMIT, connections);
            Peer.Status underDefault = peer.status();
            System.out.println("[" + device.name() + "] " + UNDER_DEFAULT_LIMIT + " connections served under a "
                    + DEFAULT_MEMLOCK_KB + " kB memlock limit without CAP_IPC_LOCK: server VmPin " + underDefault.vmPinKb()
                    + " kB, message buffers " + underDefault.messageBufferBytes() + " B");
            assertThat(underDefault.openConnections()).isEqualTo(UNDER_DEFAULT_LIMIT);
            assertThat(underDefault.vmPinKb()).isLessThanOrEqualTo(DEFAULT_MEMLOCK_KB);

            assertThat(peer.command("MEMLOCK " + RAISED_MEMLOCK_KB * 1024, "MEMLOCK")).isEqualTo("MEMLOCK 0");
            long started = System.nanoTime();
            connectReadAndRequest(client, peer, sink.segment(), UNDER_DEFAULT_LIMIT, CONNECTIONS, connections);
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started);
            long clientAfter = Long.parseLong(ScalePeerProcess.status("VmPin"));
            Peer.Status after = peer.status();
            long clientPerConnection = (clientAfter - clientBefore) * 1024 / CONNECTIONS;
            long serverPerConnection = (after.vmPinKb() - before.vmPinKb()) * 1024 / CONNECTIONS;
            System.out.println("[" + device.name() + "] " + CONNECTIONS + " connections, each a READ and a request ("
                    + (CONNECTIONS - UNDER_DEFAULT_LIMIT) + " of them in " + seconds + " s): VmPin client " + clientBefore
                    + " -> " + clientAfter + " kB (" + clientPerConnection + " B per connection), server "
                    + before.vmPinKb() + " -> " + after.vmPinKb() + " kB (" + serverPerConnection
                    + " B per connection); message buffers client " + client.metrics().messageBufferBytes()
                    + " B, server " + after.messageBufferBytes() + " B; VmLck client " + ScalePeerProcess.status("VmLck")
                    + " kB, server " + after.vmLckKb() + " kB");
            assertThat(after.openConnections()).as("connections the server holds").isEqualTo(CONNECTIONS);
            assertThat(clientAfter).as("client VmPin, kB").isLessThanOrEqualTo(RAISED_MEMLOCK_KB);
            assertThat(after.vmPinKb()).as("server VmPin, kB").isLessThanOrEqualTo(RAISED_MEMLOCK_KB);
            assertThat(clientPerConnection).as("client pinned per connection, bytes").isLessThanOrEqualTo(64 << 10);
            assertThat(serverPerConnection).as("server pinned per connection, bytes").isLessThanOrEqualTo(64 << 10);
            connections.forEach(RdmaConnection::close);
        }
    }

    /** Connects as connections {@code from} to {@code to}, a batch at a time; each READs 64 bytes and makes one request. */
    private static void connectReadAndRequest(RdmaTransport client, Peer peer, MemorySegment sink, int from, int to,
                                              List<RdmaConnection> connections) throws Exception {
        for (int first = from; first < to; first += BATCH) {
            int n = Math.min(BATCH, to - first);
            List<CompletableFuture<RdmaConnection>> connecting = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                connecting.add(client.connect(peer.address()));
            }
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            List<CompletableFuture<ByteBuffer>> answers = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                RdmaConnection c = connecting.get(i).get(WAIT, TimeUnit.SECONDS);
                connections.add(c);
                reads.add(c.read(peer.region(), 0, sink.asSlice(64L * (first + i), 64)));
                answers.add(c.request(ScalePeerProcess.ECHO, ByteBuffer.allocate(8).putInt(0, first + i)));
            }
            for (int i = 0; i < n; i++) {
                reads.get(i).get(WAIT, TimeUnit.SECONDS);
                assertThat(answers.get(i).get(WAIT, TimeUnit.SECONDS).getInt(0)).as("echo of connection %d", first + i)
                        .isEqualTo(first + i);
                assertThat(sink.get(ValueLayout.JAVA_BYTE, 64L * (first + i) + 63)).isEqualTo((byte) 7);
            }
        }
    }

    /** The serving process ({@link ScalePeerProcess}). */
    private record Peer(Process process, PrintWriter commands, LinkedBlockingQueue<String> lines,
                        InetSocketAddress address, RegionDescriptor region) implements AutoCloseable {

        record Status(long vmPinKb, long vmLckKb, long messageBufferBytes, long openConnections, long capEff) {
        }

        /** Without CAP_IPC_LOCK, with a soft memlock limit of 8 MiB and a hard one of 32 MiB. */
        static Peer start(LabDevice device) throws Exception {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            // the lab runs as root: CAP_IPC_LOCK leaves the bounding and inheritable sets, so the limit applies
            // (the soft limit first: a hard limit below the soft one is refused)
            List<String> command = new ArrayList<>(List.of("bash", "-c", "ulimit -S -l " + DEFAULT_MEMLOCK_KB + " && ulimit -H -l "
                    + RAISED_MEMLOCK_KB + " && exec setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock -- \"$@\"", "limited"));
            command.addAll(List.of(java, "--enable-native-access=ALL-UNNAMED", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                    "-cp", System.getProperty("java.class.path"), ScalePeerProcess.class.getName(),
                    device.name(), device.address(), device.kind().name()));
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
            StringBuilder seen = new StringBuilder();
            Thread.ofVirtual().start(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        lines.add(line);
                    }
                } catch (Exception ignored) {
                    // the process ended
                }
            });
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT);
            while (System.nanoTime() < deadline && (p.isAlive() || !lines.isEmpty())) {
                String line = lines.poll(1, TimeUnit.SECONDS);
                if (line != null && line.startsWith("READY ")) {
                    String[] f = line.split(" ");
                    return new Peer(p, new PrintWriter(p.getOutputStream(), true, StandardCharsets.UTF_8), lines,
                            new InetSocketAddress(device.address(), Integer.parseInt(f[1])),
                            RegionDescriptor.fromBytes(HexFormat.of().parseHex(f[2])));
                }
                if (line != null) {
                    seen.append(line).append('\n');
                }
            }
            p.destroyForcibly();
            return fail("the serving process did not start:\n" + seen);
        }

        Status status() throws InterruptedException {
            String[] f = command("STATUS", "STATUS ").split(" ");
            return new Status(Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
                    Long.parseLong(f[5], 16));
        }

        /** Sends {@code command} and returns the first line after it that starts with {@code prefix}. */
        String command(String command, String prefix) throws InterruptedException {
            commands.println(command);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT);
            while (System.nanoTime() < deadline) {
                String line = lines.poll(1, TimeUnit.SECONDS);
                if (line != null && line.startsWith(prefix)) {
                    return line;
                }
            }
            return fail("no answer to " + command + " from the serving process");
        }

        @Override
        public void close() throws InterruptedException {
            commands.close();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor();
            }
        }
    }
}
