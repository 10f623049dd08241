package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
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
 * idle connection is a few slots, not a receive depth of full-size messages. One process pair holds 1,024
 * connections, each of which does a READ and a request; {@code VmPin} of both processes is read before and after.
 * Then a serving process without {@code CAP_IPC_LOCK} (root's capability ignores the limit) and with an 8 MiB
 * {@code RLIMIT_MEMLOCK}, Debian's default, serves 64 connections.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class ConnectionScaleGuestTest {

    private static final int CONNECTIONS = 1024;
    private static final int UNDER_LIMIT_CONNECTIONS = 64;
    private static final long MEMLOCK_KB = 8 * 1024;
    /** Connects, READs and requests in flight at once. */
    private static final int BATCH = 32;
    private static final long WAIT = 120;
    private static final long CAP_IPC_LOCK = 1L << 14;

    private final LabDevice device = LabDevice.current();

    @Test
    void aThousandConnectionsEachReadAndRequestWithinThirtyTwoMebibytesPinnedPerProcess() throws Exception {
        try (Peer peer = Peer.start(device, false); Arena arena = Arena.ofShared();
             RdmaTransport client = RdmaTransport.open(VerbsLab.config(device))) {
            RegisteredRegion sink = client.register(arena.allocate(64L * CONNECTIONS, 64), Access.readSink());
            long clientBefore = Long.parseLong(ScalePeerProcess.status("VmPin"));
            Peer.Status peerBefore = peer.status();
            long started = System.nanoTime();
            List<RdmaConnection> connections = connectReadAndRequest(client, peer, sink.segment(), CONNECTIONS);
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started);
            long clientAfter = Long.parseLong(ScalePeerProcess.status("VmPin"));
            Peer.Status peerAfter = peer.status();
            long clientPerConnection = (clientAfter - clientBefore) * 1024 / CONNECTIONS;
            long peerPerConnection = (peerAfter.vmPinKb() - peerBefore.vmPinKb()) * 1024 / CONNECTIONS;
            System.out.println("[" + device.name() + "] " + CONNECTIONS + " connections, each a READ and a request, in "
                    + seconds + " s: VmPin client " + clientBefore + " -> " + clientAfter + " kB (" + clientPerConnection
                    + " B per connection), server " + peerBefore.vmPinKb() + " -> " + peerAfter.vmPinKb() + " kB ("
                    + peerPerConnection + " B per connection); message buffers client " + client.metrics().messageBufferBytes()
                    + " B, server " + peerAfter.messageBufferBytes() + " B; VmLck client "
                    + ScalePeerProcess.status("VmLck") + " kB, server " + peerAfter.vmLckKb() + " kB");
            assertThat(peerAfter.openConnections()).as("connections the server holds").isEqualTo(CONNECTIONS);
            assertThat(clientAfter * 1024).as("client VmPin, bytes").isLessThanOrEqualTo(32L << 20);
            assertThat(peerAfter.vmPinKb() * 1024).as("server VmPin, bytes").isLessThanOrEqualTo(32L << 20);
            assertThat(clientPerConnection).as("client pinned per connection, bytes").isLessThanOrEqualTo(64 << 10);
            assertThat(peerPerConnection).as("server pinned per connection, bytes").isLessThanOrEqualTo(64 << 10);
            connections.forEach(RdmaConnection::close);
        }
    }

    @Test
    void sixtyFourConnectionsAreServedUnderAnEightMebibyteMemlockLimitWithoutCapIpcLock() throws Exception {
        try (Peer peer = Peer.start(device, true); Arena arena = Arena.ofShared();
             RdmaTransport client = RdmaTransport.open(VerbsLab.config(device))) {
            Peer.Status before = peer.status();
            assertThat(before.capEff() & CAP_IPC_LOCK).as("the server's effective capabilities %x lack CAP_IPC_LOCK",
                    before.capEff()).isZero();
            assertThat(peer.register(16L << 20)).as("the limit applies: 16 MiB cannot be registered")
                    .startsWith("REFUSED").contains("RLIMIT_MEMLOCK");
            RegisteredRegion sink = client.register(arena.allocate(64L * UNDER_LIMIT_CONNECTIONS, 64), Access.readSink());
            List<RdmaConnection> connections = connectReadAndRequest(client, peer, sink.segment(), UNDER_LIMIT_CONNECTIONS);
            Peer.Status after = peer.status();
            System.out.println("[" + device.name() + "] " + UNDER_LIMIT_CONNECTIONS + " connections served under a "
                    + MEMLOCK_KB + " kB memlock limit without CAP_IPC_LOCK: server VmPin " + after.vmPinKb()
                    + " kB, message buffers " + after.messageBufferBytes() + " B");
            assertThat(after.openConnections()).isEqualTo(UNDER_LIMIT_CONNECTIONS);
            assertThat(after.vmPinKb()).isLessThanOrEqualTo(MEMLOCK_KB);
            connections.forEach(RdmaConnection::close);
        }
    }

    /** Connects {@code count} times, a batch at a time; each connection READs 64 bytes and makes one request. */
    private static List<RdmaConnection> connectReadAndRequest(RdmaTransport client, Peer peer, MemorySegment sink,
                                                              int count) throws Exception {
        List<RdmaConnection> all = new ArrayList<>();
        for (int first = 0; first < count; first += BATCH) {
            int n = Math.min(BATCH, count - first);
            List<CompletableFuture<RdmaConnection>> connecting = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                connecting.add(client.connect(peer.address()));
            }
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            List<CompletableFuture<ByteBuffer>> answers = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                RdmaConnection c = connecting.get(i).get(WAIT, TimeUnit.SECONDS);
                all.add(c);
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
        return all;
    }

    /** The serving process ({@link ScalePeerProcess}), limited or not. */
    private record Peer(Process process, PrintWriter commands, LinkedBlockingQueue<String> lines,
                        InetSocketAddress address, RegionDescriptor region) implements AutoCloseable {

        record Status(long vmPinKb, long vmLckKb, long messageBufferBytes, long openConnections, long capEff) {
        }

        static Peer start(LabDevice device, boolean limited) throws Exception {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            List<String> command = new ArrayList<>();
            if (limited) {
                // the lab runs as root: drop CAP_IPC_LOCK (bounding and inheritable sets) so the limit applies
                command.addAll(List.of("bash", "-c", "ulimit -l " + MEMLOCK_KB
                        + " && exec setpriv --bounding-set=-ipc_lock --inh-caps=-ipc_lock -- \"$@\"", "limited"));
            }
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
            while (System.nanoTime() < deadline) {
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
            return fail("the serving process did not start (limited " + limited + "):\n" + seen);
        }

        Status status() throws InterruptedException {
            String[] f = answer("STATUS", "STATUS ").split(" ");
            return new Status(Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
                    Long.parseLong(f[5], 16));
        }

        String register(long bytes) throws InterruptedException {
            return answer("REGISTER " + bytes, "RE");
        }

        private String answer(String command, String prefix) throws InterruptedException {
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
