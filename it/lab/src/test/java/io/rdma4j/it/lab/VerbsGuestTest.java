package io.rdma4j.it.lab;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtectedModeException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
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
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

/** What only a real verbs device shows: detection, NIC-reported errors, peer death, resource release. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class VerbsGuestTest {

    private static final long WAIT = 120;
    private final LabDevice device = LabDevice.current();

    @Test
    void autoDetectionClassifiesTheDevice() {
        TransportConfig auto = TransportConfig.builder().device(device.name()).localAddress(device.address()).build();
        try (RdmaTransport t = RdmaTransport.open(auto)) {
            assertThat(t.provider()).isEqualTo("verbs");
            String expected = device.kind() == LabDevice.Kind.RXE ? "RoCE v2" : "iWARP";
            assertThat(t.selection().reason()).startsWith("auto: ").contains(device.name()).contains(expected);
            System.out.println("[" + device.name() + "] auto selection: " + t.selection().reason());
        }
        // without any override, auto still picks verbs (rxe0 or siw0) over tcp
        try (RdmaTransport t = RdmaTransport.open(TransportConfig.builder().localAddress(device.address()).build())) {
            assertThat(t.provider()).isEqualTo("verbs");
        }
    }

    @Test
    void protectedModeRefusesAListenerOnTheDeviceUnlessPeersMustProveASecret() {
        TransportConfig unauthenticated = VerbsLab.config(device).toBuilder().allowUnauthenticated(false).build();
        InetSocketAddress onDevice = new InetSocketAddress(device.address(), 0);
        try (RdmaTransport t = RdmaTransport.open(unauthenticated)) {
            assertThatThrownBy(() -> t.listen(onDevice, c -> { }))
                    .isInstanceOf(ProtectedModeException.class)
                    .hasMessageContaining("shared-secret").hasMessageContaining("allow-unauthenticated=true")
                    .as("verbs has no TLS to offer").message().doesNotContain("tcp.tls");
        }
        try (RdmaTransport t = RdmaTransport.open(unauthenticated.toBuilder().sharedSecret("the lab's secret, 16+ bytes")
                .build())) {
            assertThat(t.listen(onDevice, c -> { }).localAddress().getPort()).isPositive();
        }
    }

    @Test
    void forgedKeyFailsWithTheCompletionStatusThenTheConnectionIsClosed() throws Exception {
        try (Arena arena = Arena.ofShared(); Pair p = Pair.open(device)) {
            RegisteredRegion remote = p.server.register(arena.allocate(4096, 64), Access.remoteRead());
            RegisteredRegion sink = p.client.register(arena.allocate(4096, 64), Access.readSink());
            RegionDescriptor d = remote.descriptor();
            RegionDescriptor forged = new RegionDescriptor(d.provider(), d.address(), d.length(), d.key() ^ 0x00ff_ff00L, d.access());
            Throwable t = failure(p.connection.read(forged, 0, sink.segment()));
            if (device.kind() == LabDevice.Kind.SIW && t instanceof ConnectionClosedException) {
                // iWARP: the responder answers with TERMINATE, which tears the connection down and flushes the READ
                assertThat(t).hasMessageContaining("IBV_WC status 5");
            } else {
                assertThat(t).isInstanceOf(RemoteAccessException.class).hasMessageContaining("remote access error");
            }
            assertThat(sink.segment().asByteBuffer().equals(ByteBuffer.allocate(4096)))
                    .as("the refused read returned no data").isTrue();
            awaitClosed(p.connection);
            assertThat(failure(p.connection.read(d, 0, sink.segment()))).isInstanceOf(ConnectionClosedException.class);
            // a new connection works
            RdmaConnection again = p.client.connect(p.listener.localAddress()).get(WAIT, TimeUnit.SECONDS);
            again.read(d, 0, sink.segment()).get(WAIT, TimeUnit.SECONDS);
        }
    }

    @Test
    void deregistrationWaitsForTheReadInFlight() throws Exception {
        long size = 4L << 20;
        try (Arena arena = Arena.ofShared(); Pair p = Pair.open(device)) {
            MemorySegment published = arena.allocate(size, 4096);
            for (long i = 0; i < size; i++) {
                published.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + 3));
            }
            RegisteredRegion remote = p.server.register(published, Access.remoteRead());
            RegisteredRegion sink = p.client.register(arena.allocate(size, 4096), Access.readSink());
            CompletableFuture<Void> read = p.connection.read(remote.descriptor(), 0, sink.segment());
            // The transport revokes (ibv_dereg_mr) first, then waits for the operations pinning the region:
            // close returns only once the NIC can no longer write into the sink (the contract suite checks that no
            // byte lands after close returns; the user's future may complete a moment later, off the I/O thread).
            sink.close();
            try {
                read.get(WAIT, TimeUnit.SECONDS);
                for (long i = 0; i < size; i += 4093) {
                    assertThat(sink.segment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) (i * 7 + 3));
                }
            } catch (ExecutionException e) {
                // the NIC refused the deregistered sink: the completion names it, and the QP is gone
                assertThat(e.getCause()).hasMessageContaining("local protection error");
                awaitClosed(p.connection);
            }
            assertThat(p.client.registeredRegions()).isZero();
        }
    }

    @Test
    void closingTheTransportLeavesNoMrOrQpBehind() throws Exception {
        Counts before = Counts.now(device.name());
        try (Arena arena = Arena.ofShared()) {
            Pair p = Pair.open(device);
            RegisteredRegion remote = p.server.register(arena.allocate(1 << 16, 64), Access.remoteRead());
            RegisteredRegion sink = p.client.register(arena.allocate(1 << 16, 64), Access.readSink());
            p.connection.read(remote.descriptor(), 0, sink.segment()).get(WAIT, TimeUnit.SECONDS);
            Counts during = Counts.now(device.name());
            assertThat(during.qp).as("QPs while connected").isGreaterThanOrEqualTo(before.qp + 2);
            assertThat(during.mr).as("MRs while connected").isGreaterThanOrEqualTo(before.mr + 2);
            assertThat(during.cmId).as("cm ids while connected (listener, both connections): %s", during)
                    .isGreaterThanOrEqualTo(before.cmId + 3);
            p.close();
        }
        Counts after = Counts.now(device.name());
        assertThat(after.qp).as("QPs after close (before: %s)", before).isEqualTo(before.qp);
        assertThat(after.mr).as("MRs after close (before: %s)", before).isEqualTo(before.mr);
        assertThat(after.cmId).as("cm ids after close (before: %s)", before).isEqualTo(before.cmId);
        System.out.println("[" + device.name() + "] rdma resource before " + before + ", after " + after);
    }

    @Test
    void messageBuffersAreSharedByConnectionsApartFromRegions() throws Exception {
        try (Arena arena = Arena.ofShared(); Pair p = Pair.open(device)) {
            long shared = p.client.metrics().messageBufferBytes();
            assertThat(shared).as("the client's receive pool for its first connection").isPositive()
                    .isLessThanOrEqualTo(2L << 20);
            long regions = p.client.metrics().registeredBytes();
            RegisteredRegion sink = p.client.register(arena.allocate(1 << 16, 64), Access.readSink());
            assertThat(p.client.metrics().registeredBytes() - regions).as("a region counts as a region").isEqualTo(1 << 16);
            assertThat(p.client.metrics().messageBufferBytes()).as("and not as a message buffer").isEqualTo(shared);
            List<RdmaConnection> more = new ArrayList<>();
            for (int i = 0; i < 15; i++) {
                more.add(p.client.connect(p.listener.localAddress()).get(WAIT, TimeUnit.SECONDS));
            }
            assertThat(p.client.metrics().messageBufferBytes()).as("16 idle connections share the first chunk of slots")
                    .isEqualTo(shared);
            more.forEach(RdmaConnection::close);
            sink.close();
            System.out.println("[" + device.name() + "] message buffers for 1 to 16 connections: " + shared + " bytes");
        }
    }

    /**
     * Credits the server lends clients for their bursts come back once the clients stop sending, whether unused in
     * the server's hands or the clients': an idle connection keeps no share of the shared receive pool. Four
     * connections burst one after the other, each ending with whatever loan its last batch of credits left it.
     */
    @Test
    void creditsLentForBurstsGoBackToThePoolOnceTheSendersAreIdle() throws Exception {
        TransportConfig config = VerbsLab.config(device);
        LinkedBlockingQueue<RdmaConnection> accepted = new LinkedBlockingQueue<>();
        try (RdmaTransport server = RdmaTransport.open(config); RdmaTransport client = RdmaTransport.open(config)) {
            RdmaListener listener = server.listen(new InetSocketAddress(device.address(), 0), accepted::add);
            byte[] big = new byte[config.maxMessageSize()];
            java.util.concurrent.atomic.AtomicLong mostLent = new java.util.concurrent.atomic.AtomicLong();
            java.util.concurrent.atomic.AtomicBoolean sampling = new java.util.concurrent.atomic.AtomicBoolean(true);
            Thread sampler = Thread.ofPlatform().daemon().start(() -> {
                while (sampling.get()) {
                    mostLent.accumulateAndGet(server.metrics().lentReceiveCredits(), Math::max);
                    java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
                }
            });
            List<RdmaConnection> connections = new ArrayList<>();
            for (int c = 0; c < 4; c++) {
                RdmaConnection connection = client.connect(listener.localAddress()).get(WAIT, TimeUnit.SECONDS);
                RdmaConnection onServer = accepted.poll(WAIT, TimeUnit.SECONDS);
                List<CompletableFuture<Void>> sends = new ArrayList<>();
                for (int i = 0; i < 8; i++) {
                    sends.add(connection.send(big));
                }
                for (int i = 0; i < 8; i++) {
                    assertThat(onServer.receive().get(WAIT, TimeUnit.SECONDS).remaining()).isEqualTo(big.length);
                }
                CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).get(WAIT, TimeUnit.SECONDS);
                connections.add(connection);
            }
            long afterBursts = server.metrics().lentReceiveCredits();
            long idleSince = System.nanoTime();
            awaitValue(() -> server.metrics().lentReceiveCredits(), 0, "credits lent to the idle clients, back in the pool");
            long backAfterMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - idleSince);
            sampling.set(false);
            sampler.join();
            assertThat(mostLent.get()).as("credits the server lent during the bursts").isPositive();
            assertThat(connections).allMatch(RdmaConnection::isOpen);
            connections.getFirst().send(new byte[] {7}).get(WAIT, TimeUnit.SECONDS);
            System.out.println("[" + device.name() + "] credits lent: at most " + mostLent.get() + ", " + afterBursts
                    + " once the bursts were done, all back " + backAfterMillis + " ms after");
        }
    }

    private static void awaitValue(java.util.function.LongSupplier value, long expected, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT);
        while (value.getAsLong() != expected && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(value.getAsLong()).as(what).isEqualTo(expected);
    }

    @Test
    void peerDeathFailsReadsWithConnectionClosed() throws Exception {
        long size = 16L << 20;
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process child = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-XX:TieredStopAtLevel=1",
                "-cp", System.getProperty("java.class.path"), VerbsPeerProcess.class.getName(),
                device.name(), device.address(), Long.toString(size)).redirectErrorStream(true).start();
        try (Arena arena = Arena.ofShared(); RdmaTransport client = RdmaTransport.open(VerbsLab.config(device))) {
            LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
            Thread.ofVirtual().start(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        lines.add(line);
                    }
                } catch (Exception ignored) {
                    // the child was killed
                }
            });
            String ready = null;
            StringBuilder seen = new StringBuilder();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT);
            while (ready == null && System.nanoTime() < deadline) {
                String line = lines.poll(1, TimeUnit.SECONDS);
                if (line != null) {
                    seen.append(line).append('\n');
                    if (line.startsWith("READY ")) {
                        ready = line;
                    }
                }
            }
            if (ready == null) {
                fail("child responder did not start:\n" + seen);
            }
            String[] f = ready.split(" ");
            RegionDescriptor d = RegionDescriptor.fromBytes(HexFormat.of().parseHex(f[2]));
            RdmaConnection c = client.connect(new InetSocketAddress(device.address(), Integer.parseInt(f[1])))
                    .get(WAIT, TimeUnit.SECONDS);
            RegisteredRegion sink = client.register(arena.allocate(size, 4096), Access.readSink());
            c.read(d, 0, sink.segment().asSlice(0, 4096)).get(WAIT, TimeUnit.SECONDS);
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                reads.add(c.read(d, 0, sink.segment()));
            }
            child.destroyForcibly().waitFor();
            int closed = 0;
            for (CompletableFuture<Void> r : reads) {
                try {
                    r.get(WAIT, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    assertThat(e.getCause()).isInstanceOf(ConnectionClosedException.class);
                    closed++;
                }
            }
            assertThat(closed).as("reads cut off by the peer's death").isPositive();
            awaitClosed(c);
            assertThat(failure(c.read(d, 0, sink.segment().asSlice(0, 64)))).isInstanceOf(ConnectionClosedException.class);
        } finally {
            child.destroyForcibly();
        }
    }

    // ---- helpers ----

    /** Two transports on the device and one connection between them. */
    static final class Pair implements AutoCloseable {
        final RdmaTransport server;
        final RdmaTransport client;
        final RdmaListener listener;
        final RdmaConnection connection;

        private Pair(RdmaTransport server, RdmaTransport client, RdmaListener listener, RdmaConnection connection) {
            this.server = server;
            this.client = client;
            this.listener = listener;
            this.connection = connection;
        }

        static Pair open(LabDevice device) throws Exception {
            return open(VerbsLab.config(device), device);
        }

        static Pair open(TransportConfig config, LabDevice device) throws Exception {
            RdmaTransport server = RdmaTransport.open(config);
            RdmaTransport client = RdmaTransport.open(config);
            RdmaListener listener = server.listen(new InetSocketAddress(device.address(), 0), c -> { });
            RdmaConnection connection = client.connect(listener.localAddress()).get(WAIT, TimeUnit.SECONDS);
            return new Pair(server, client, listener, connection);
        }

        @Override
        public void close() {
            client.close();
            server.close();
        }
    }

    private static Throwable failure(CompletableFuture<?> f) throws Exception {
        try {
            f.get(WAIT, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("operation succeeded but was expected to fail");
    }

    private static void awaitClosed(RdmaConnection c) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT);
        while (c.isOpen()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("connection still open");
            }
            Thread.sleep(10);
        }
    }

    /** One device's QPs and MRs, as `rdma resource show` counts them, and its cm ids less wildcard listeners. */
    record Counts(int qp, int mr, int cmId, String line) {
        private static final Pattern FIELD = Pattern.compile("\\b(\\S+) (\\d+)");

        static Counts now(String device) throws Exception {
            String out = GuestCommand.run(Duration.ofSeconds(60), "rdma", "resource", "show").requireSuccess();
            for (String line : out.lines().toList()) {
                if (line.contains(" " + device + ":")) {
                    int qp = -1;
                    int mr = -1;
                    Matcher m = FIELD.matcher(line.substring(line.indexOf(device + ":") + device.length() + 1));
                    while (m.find()) {
                        switch (m.group(1)) {
                            case "qp" -> qp = Integer.parseInt(m.group(2));
                            case "mr" -> mr = Integer.parseInt(m.group(2));
                            default -> { }
                        }
                    }
                    if (qp < 0 || mr < 0) {
                        throw new AssertionError("cannot read qp/mr from: " + line);
                    }
                    CmIds cm = cmIds(device);
                    return new Counts(qp, mr, cm.own(), line.strip() + " (cm_id listed " + (cm.own() + cm.wildcard()) + ", "
                            + cm.wildcard() + " of them wildcard, not counted)");
                }
            }
            throw new AssertionError("no line for " + device + " in `rdma resource show`:\n" + out);
        }

        /**
         * The device's cm ids, from one listing: those not on the wildcard address, and those on it. rdma_cm places a
         * listener on 0.0.0.0 on every device, and the other device's guest JVM runs at the same time: its perftest
         * server (rdma_cm on siw0) listens there, and may start or stop at any moment, so both counts come from the
         * same listing (the summary line, read a moment apart, once counted one that the listing did not). The
         * transports under test bind the device's own address, so nothing of theirs is left out.
         */
        private static CmIds cmIds(String device) throws Exception {
            String out = GuestCommand.run(Duration.ofSeconds(60), "rdma", "resource", "show", "cm_id").requireSuccess();
            List<String> onDevice = out.lines().filter(l -> l.contains("link " + device + "/")).toList();
            int wildcard = (int) onDevice.stream().filter(l -> l.contains("src-addr 0.0.0.0:")).count();
            return new CmIds(onDevice.size() - wildcard, wildcard);
        }

        /** A device's cm ids in one listing: on its own addresses, and on the wildcard address. */
        private record CmIds(int own, int wildcard) {
        }

        @Override
        public String toString() {
            return line;
        }
    }
}
