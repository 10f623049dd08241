package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.ChildClassPath;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Peers that flood a responder in a child JVM at {@code -Xmx256m}, with READ requests whose responses they never
 * read or with sockets that never finish their handshake: the responder's heap stays bounded and another peer is
 * still served.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class TcpFloodHeapTest {

    private static final int FLOODERS = 4;
    private static final long MAX_HEAP_AFTER_FLOOD = 64L << 20;

    /** The {@link FloodResponder} child: its port, the region it publishes, and its heap on request. */
    private record Responder(Process child, PrintStream in, BufferedReader out, InetSocketAddress address,
                             long regionAddress, long key) implements AutoCloseable {

        static Responder start() throws IOException {
            String java = ProcessHandle.current().info().command().orElseThrow(() -> new AssertionError("cannot find the java binary"));
            // An OutOfMemoryError anywhere ends the child, which the tests see as a dead responder.
            Process child = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-Xmx256m",
                    "-XX:+ExitOnOutOfMemoryError",
                    "-cp", ChildClassPath.ofThisTestRun(), FloodResponder.class.getName())
                    .redirectError(ProcessBuilder.Redirect.INHERIT)
                    .start();
            BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
            PrintStream in = new PrintStream(child.getOutputStream(), true, StandardCharsets.UTF_8);
            String line;
            while ((line = out.readLine()) != null && !line.startsWith("READY ")) {
                // skip anything else the child prints
            }
            assertThat(line).as("child announced its region").isNotNull();
            String[] ready = line.split(" ");
            return new Responder(child, in, out, new InetSocketAddress(InetAddress.getLoopbackAddress(),
                    Integer.parseInt(ready[1])), Long.parseLong(ready[2]), Long.parseLong(ready[3]));
        }

        long heap() throws IOException {
            return TcpFloodHeapTest.heap(in, out);
        }

        /** A regular peer connects and reads the whole region; returns how long that took, in milliseconds. */
        long servedMillis() throws Exception {
            long start = System.nanoTime();
            try (Arena arena = Arena.ofShared();
                 RdmaTransport client = RdmaTransport.open(TransportConfig.builder().provider("tcp").build())) {
                RegisteredRegion sink = client.register(arena.allocate(1 << 20), Access.readSink());
                try (RdmaConnection c = client.connect(address).get(10, TimeUnit.SECONDS)) {
                    c.read(new RegionDescriptor("tcp", regionAddress, 1 << 20, key, Access.remoteRead()), 0, sink.segment())
                            .get(10, TimeUnit.SECONDS);
                }
                long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                for (int i = 0; i < 1 << 20; i += 4099) {
                    assertThat(sink.segment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) i);
                }
                return millis;
            }
        }

        @Override
        public void close() throws InterruptedException, IOException {
            child.getOutputStream().close();
            if (!child.waitFor(10, TimeUnit.SECONDS)) {
                child.destroyForcibly();
            }
        }
    }

    @Test
    void readFloodsThatAreNeverReadLeaveTheHeapBoundedAndAnotherPeerServed() throws Exception {
        List<Socket> flooders = new ArrayList<>();
        try (Responder responder = Responder.start()) {
            long heapBefore = responder.heap();
            List<AtomicLong> written = new ArrayList<>();
            for (int i = 0; i < FLOODERS; i++) {
                Socket s = new Socket(responder.address().getAddress(), responder.address().getPort());
                flooders.add(s);
                s.getOutputStream().write(TcpFrameCodec.encodeHello(0, new byte[TcpFrameCodec.NONCE_SIZE]).array());
                s.getInputStream().readNBytes(TcpFrameCodec.HELLO_SIZE);
                // small reads hit the count bound; whole-region reads the byte bound
                long length = i == 0 ? 1 << 20 : 16;
                AtomicLong w = new AtomicLong();
                written.add(w);
                flood(s.getOutputStream(), TcpFrameCodec.encodeRequest(TcpFrameCodec.READ_REQ, 1, responder.regionAddress(),
                        length, responder.key()), w);
            }
            long stalledAt = stalled(written, 30_000);
            assertThat(responder.child().isAlive()).as("the responder survived the flood").isTrue();
            long heapAfter = responder.heap();

            // a second peer is served while the flooders still hold their connections
            responder.servedMillis();
            long requests = stalledAt / (TcpFrameCodec.HEADER_SIZE + TcpFrameCodec.REQUEST_BODY_SIZE);
            System.out.printf("read flood at -Xmx256m: %d peers' sockets took %d requests before the responder stopped"
                            + " reading; heap after GC %d MiB before, %d MiB during the flood; a second peer was served%n",
                    FLOODERS, requests, heapBefore >> 20, heapAfter >> 20);
            assertThat(heapAfter).as("responder heap in use during the flood").isLessThan(MAX_HEAP_AFTER_FLOOD);
            assertThat(responder.child().isAlive()).isTrue();
        } finally {
            for (Socket s : flooders) {
                s.close();
            }
        }
    }

    /**
     * 4,096 sockets from 32 loopback addresses (127.0.0.2-33, 128 each, all under tcp.max-connections-per-address)
     * that connect and never say a word, at the responder's default limits: together they would fill
     * tcp.max-connections. Half-open sockets have a budget of their own, a quarter of it, and a new one displaces the
     * oldest, so a regular peer is still served while all of them are held open.
     */
    @Test
    void halfOpenSocketsFrom32AddressesDisplaceEachOtherAndARegularPeerIsServed() throws Exception {
        int addresses = 32;
        int sockets = 4096;
        List<Socket> silent = new ArrayList<>(sockets);
        try (Responder responder = Responder.start()) {
            long heapBefore = responder.heap();
            long start = System.nanoTime();
            for (int i = 0; i < sockets; i++) {
                silent.add(connectFrom(2 + i % addresses, responder.address()));
            }
            long openedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            long servedMillis = responder.servedMillis();
            long heapDuring = responder.heap();
            long stillOpen = silent.stream().filter(s -> !TcpHostilePeerTest.closedByResponder(s)).count();
            System.out.printf("half-open flood at -Xmx256m: %d silent sockets from %d addresses opened in %d ms; a regular"
                            + " peer connected and read 1 MiB in %d ms; %d of them still held by the responder (the"
                            + " rest displaced); heap after GC %d MiB before, %d MiB during%n", sockets, addresses,
                    openedMillis, servedMillis, stillOpen, heapBefore >> 20, heapDuring >> 20);
            assertThat(stillOpen).as("half-open sockets the responder holds: at most tcp.max-handshakes (a quarter of"
                    + " tcp.max-connections)").isLessThanOrEqualTo(4096 / 4);
            assertThat(heapDuring).as("responder heap in use during the flood").isLessThan(MAX_HEAP_AFTER_FLOOD);
            assertThat(responder.child().isAlive()).isTrue();
        } finally {
            for (Socket s : silent) {
                s.close();
            }
        }
    }

    /**
     * 1,000 connections from eight loopback addresses (127.0.0.2-9) send 64 KiB messages as fast as the responder
     * reads them, and the application never receives one. Each connection may queue 4 MiB of them (tcp.max-inbox-bytes),
     * 4 GB together; the transport's budget (tcp.max-buffered-bytes, a quarter of the -Xmx256m heap by default) stops
     * reading from every connection past its share, so the heap stays within it, and a regular peer is served.
     */
    @Test
    void sendFloodsFromAThousandConnectionsStayWithinTheTransportsBudgetAndARegularPeerIsServed() throws Exception {
        int connections = 1000;
        int addresses = 8;
        byte[] frame = plainMessageFrame(64 * 1024 - 16);
        List<Socket> flooders = new ArrayList<>(connections);
        List<AtomicLong> written = new ArrayList<>(connections);
        try (Responder responder = Responder.start()) {
            long heapBefore = responder.heap();
            for (int i = 0; i < connections; i++) {
                Socket s = connectFrom(2 + i % addresses, responder.address());
                flooders.add(s);
                s.getOutputStream().write(TcpFrameCodec.encodeHello(0, new byte[TcpFrameCodec.NONCE_SIZE]).array());
                s.getInputStream().readNBytes(TcpFrameCodec.HELLO_SIZE);
            }
            // All connected first: the flood starts once no handshake is left to compete with it.
            for (Socket s : flooders) {
                AtomicLong w = new AtomicLong();
                written.add(w);
                OutputStream out = s.getOutputStream();
                Thread.ofVirtual().start(() -> {
                    try {
                        while (true) {
                            out.write(frame);
                            w.addAndGet(frame.length);
                        }
                    } catch (IOException closed) {
                        // the test closed the socket, or the responder died
                    }
                });
            }
            long stalledAt = stalled(written, 60_000);
            assertThat(responder.child().isAlive()).as("the responder survived the flood (no OutOfMemoryError)").isTrue();
            long heapDuring = responder.heap();
            long servedMillis = responder.servedMillis();
            System.out.printf("send flood at -Xmx256m: %d connections' sockets took %d MiB of messages the application never"
                            + " receives before the responder stopped reading; heap after GC %d MiB before, %d MiB during;"
                            + " a regular peer connected and read 1 MiB in %d ms%n", connections, stalledAt >> 20,
                    heapBefore >> 20, heapDuring >> 20, servedMillis);
            assertThat(heapDuring).as("responder heap in use: at most its budget (a quarter of 256 MiB) + 32 MiB")
                    .isLessThan((64L << 20) + (32L << 20));
            assertThat(responder.child().isAlive()).isTrue();
        } finally {
            for (Socket s : flooders) {
                s.close();
            }
        }
    }

    /** A tcp SEND frame carrying a plain rdma4j message (its 16-byte header, then {@code payload} bytes). */
    private static byte[] plainMessageFrame(int payload) {
        ByteBuffer header = TcpFrameCodec.encodeSendHeader(16 + payload);
        ByteBuffer frame = ByteBuffer.allocate(header.remaining() + 16 + payload);
        frame.put(header).put((byte) 1).put((byte) 1); // version 1, kind MESSAGE; the rest of the header is zero
        return frame.array();
    }

    /** A socket from 127.0.0.{@code lastOctet} connected to {@code to}. */
    private static Socket connectFrom(int lastOctet, InetSocketAddress to) throws IOException {
        Socket s = new Socket();
        s.bind(new InetSocketAddress(InetAddress.getByAddress(new byte[] {127, 0, 0, (byte) lastOctet}), 0));
        s.connect(to, 5000);
        return s;
    }

    private static long heap(PrintStream in, BufferedReader out) throws IOException {
        in.println("heap");
        String line;
        while ((line = out.readLine()) != null && !line.startsWith("HEAP ")) {
            // skip
        }
        assertThat(line).as("child answered with its heap").isNotNull();
        return Long.parseLong(line.substring(5));
    }

    private static void flood(OutputStream out, ByteBuffer frame, AtomicLong written) {
        byte[] bytes = new byte[frame.remaining()];
        frame.get(bytes);
        byte[] batch = new byte[bytes.length * 256];
        for (int i = 0; i < batch.length; i += bytes.length) {
            System.arraycopy(bytes, 0, batch, i, bytes.length);
        }
        Thread.ofVirtual().start(() -> {
            try {
                while (true) {
                    out.write(batch);
                    written.addAndGet(batch.length);
                }
            } catch (IOException closed) {
                // the test closed the socket, or the responder died
            }
        });
    }

    /** Waits until no flooder's byte count grows for a second; returns their total then. */
    private static long stalled(List<AtomicLong> written, long maxMillis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(maxMillis);
        long last = -1;
        while (System.nanoTime() < deadline) {
            long now = written.stream().mapToLong(AtomicLong::get).sum();
            if (now == last) {
                return now;
            }
            last = now;
            Thread.sleep(1000);
        }
        return written.stream().mapToLong(AtomicLong::get).sum();
    }
}
