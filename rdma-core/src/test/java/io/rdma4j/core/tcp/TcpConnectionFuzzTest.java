package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegisteredRegion;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Stateful fuzzing of the tcp connection state machine against a real responder: each sequence is a new
 * connection carrying frames generated from valid ones and mutated (data without a request, duplicate ids,
 * answers and errors for requests never made, truncated and oversized lengths, bad message headers, garbage,
 * broken handshakes), then the peer's end of stream. Checks: the responder never crashes, every connection
 * ends within a deadline, and no byte outside the registered regions is read or written: the regions sit
 * between canary bytes ({@value #CANARY}) that the fuzzer never sends, so a canary byte in served data or a
 * changed canary is an access outside a region.
 *
 * <p>The test command sends a million frames (about 25 s on 2 cores); {@code -Drdma4j.fuzz.frames=N} changes that,
 * {@code -Drdma4j.fuzz.seed=N} replays one run.
 */
@Timeout(value = 30, unit = TimeUnit.MINUTES)
class TcpConnectionFuzzTest {

    private static final long FRAMES = Long.getLong("rdma4j.fuzz.frames", 1_000_000);
    private static final long SEED = Long.getLong("rdma4j.fuzz.seed", System.nanoTime());
    private static final byte CANARY = (byte) 0xCC;
    private static final int REGION = 4096;
    private static final int ECHO = 0x10000;
    private static final long DEADLINE_MILLIS = 5000;

    private long regionAddress;
    private long regionKey;
    private long readOnlyAddress;
    private long readOnlyKey;

    private long sequences;
    private long frames;
    private long served;
    private long refused;
    private long replies;
    private long endedByResponderFirst;
    private long outOfRegionBytes;

    @Test
    void mutatedFrameSequencesNeverCrashHangOrTouchMemoryOutsideRegions() throws Exception {
        System.out.println("tcp connection fuzz: seed " + SEED + " (-Drdma4j.fuzz.seed to replay), " + FRAMES + " frames");
        Random random = new Random(SEED);
        Logger rdma4jLog = Logger.getLogger("io.rdma4j");
        WarningCounter warnings = new WarningCounter();
        rdma4jLog.addHandler(warnings);
        try (Arena arena = Arena.ofShared();
             RdmaTransport server = RdmaTransport.open(TransportConfig.builder().provider("tcp").maxMessageSize(4096)
                     .providerOption("tcp.handshake-timeout", "2s").build())) {
            MemorySegment rw = guarded(arena);
            MemorySegment ro = guarded(arena);
            RegisteredRegion writable = withoutCanaryInKey(server, rw.asSlice(REGION, REGION), Access.remoteReadWrite());
            RegisteredRegion readOnly = withoutCanaryInKey(server, ro.asSlice(REGION, REGION), Access.remoteRead());
            regionAddress = writable.descriptor().address();
            regionKey = writable.descriptor().key();
            readOnlyAddress = readOnly.descriptor().address();
            readOnlyKey = readOnly.descriptor().key();
            RdmaListener listener = server.listen(new InetSocketAddress("127.0.0.1", 0),
                    RequestHandlers.of(ECHO, RequestHandler.answering((body, context) -> body)));
            int port = listener.localAddress().getPort();
            long rejectedBefore = server.metrics().rejectedRequests();
            long start = System.nanoTime();
            while (frames < FRAMES) {
                runSequence(random, port);
            }
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (server.metrics().openConnections() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(server.metrics().openConnections()).as("every fuzzed connection ended").isZero();
            long rejected = server.metrics().rejectedRequests() - rejectedBefore;
            System.out.printf("tcp connection fuzz: %d frames in %d sequences (connections) in %d ms; responses: %d served"
                            + " (READ_DONE, WRITE_ACK), %d refused (ERROR), %d replies to messages; %d connections ended by"
                            + " the responder before the peer's end of stream; %d rejections counted (refusals, protocol"
                            + " violations, bad handshakes); 0 hangs; %d bytes outside regions%n",
                    frames, sequences, millis, served, refused, replies, endedByResponderFirst, rejected, outOfRegionBytes);
            assertThat(outOfRegionBytes).as("served bytes from outside the registered regions").isZero();
            long seconds = TimeUnit.MILLISECONDS.toSeconds(millis);
            assertThat(warnings.count.get()).as("warnings logged for %d rejections in %d s: at most one a second", rejected, seconds)
                    .isLessThanOrEqualTo(seconds + 2);
            assertCanaries(rw);
            assertCanaries(ro);
            assertThat(served).as("valid requests among the mutations are served").isPositive();
            assertThat(refused).as("invalid requests are refused").isPositive();
            assertStillServes(server, listener, readOnly);
        } finally {
            rdma4jLog.removeHandler(warnings);
        }
    }

    /** Counts the warnings rdma4j logs. */
    private static final class WarningCounter extends Handler {
        final AtomicLong count = new AtomicLong();

        @Override
        public void publish(LogRecord record) {
            if (record.getLevel() == Level.WARNING) {
                count.incrementAndGet();
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    }

    /**
     * Three pages of canary; the middle one is registered and filled with bytes the fuzzer may also send. The fuzzer
     * turns every canary byte it would send into another, so the address's bytes above the page offset hold none:
     * else every request meant to be valid would name another address (a key holding one is registered again).
     */
    private static MemorySegment guarded(Arena arena) {
        MemorySegment s = arena.allocate(3 * REGION, 4096);
        while (hasCanaryByte((s.address() + REGION) >>> 16) || hasCanaryByte((s.address() + 2 * REGION - 1) >>> 16)) {
            s = arena.allocate(3 * REGION, 4096);
        }
        s.fill(CANARY);
        for (int i = 0; i < REGION; i++) {
            s.set(ValueLayout.JAVA_BYTE, REGION + i, safe(i));
        }
        return s;
    }

    /** Registers {@code memory}, again until its key holds no canary byte (see {@link #guarded}). */
    private static RegisteredRegion withoutCanaryInKey(RdmaTransport server, MemorySegment memory, Set<Access> access) {
        RegisteredRegion r = server.register(memory, access);
        while (hasCanaryByte(r.descriptor().key())) {
            r.close();
            r = server.register(memory, access);
        }
        return r;
    }

    private static boolean hasCanaryByte(long value) {
        for (int i = 0; i < Long.BYTES; i++) {
            if ((byte) (value >>> (8 * i)) == CANARY) {
                return true;
            }
        }
        return false;
    }

    private static byte safe(int i) {
        return (byte) (1 + Math.floorMod(i, 199));
    }

    private static void assertCanaries(MemorySegment s) {
        for (int i = 0; i < REGION; i++) {
            assertThat(s.get(ValueLayout.JAVA_BYTE, i)).as("canary before the region at %d", i).isEqualTo(CANARY);
            assertThat(s.get(ValueLayout.JAVA_BYTE, 2 * REGION + i)).as("canary after the region at %d", i).isEqualTo(CANARY);
        }
        for (int i = 0; i < REGION; i++) {
            assertThat(s.get(ValueLayout.JAVA_BYTE, REGION + i)).as("no canary byte written into the region").isNotEqualTo(CANARY);
        }
    }

    private static void assertStillServes(RdmaTransport server, RdmaListener listener, RegisteredRegion region) throws Exception {
        try (Arena arena = Arena.ofShared();
             RdmaTransport client = RdmaTransport.open(TransportConfig.builder().provider("tcp").build())) {
            RegisteredRegion sink = client.register(arena.allocate(REGION), Access.readSink());
            try (RdmaConnection c = client.connect(listener.localAddress()).get(10, TimeUnit.SECONDS)) {
                c.read(region.descriptor(), 0, sink.segment()).get(10, TimeUnit.SECONDS);
            }
            for (int i = 0; i < REGION; i++) {
                assertThat(sink.segment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo(safe(i));
            }
        }
    }

    // ---- one sequence ----

    private void runSequence(Random random, int port) throws Exception {
        sequences++;
        ByteArrayOutputStream wire = new ByteArrayOutputStream();
        int mode = random.nextInt(100);
        if (mode < 4) {
            byte[] hello = TcpFrameCodec.encodeHello(0, new byte[TcpFrameCodec.NONCE_SIZE]).array();
            mutate(random, hello);
            wire.writeBytes(hello);
        } else if (mode < 6) {
            wire.writeBytes(TcpFrameCodec.encodeHello(TcpFrameCodec.FLAG_AUTH, new byte[TcpFrameCodec.NONCE_SIZE]).array());
        } else {
            wire.writeBytes(TcpFrameCodec.encodeHello(0, new byte[TcpFrameCodec.NONCE_SIZE]).array());
        }
        // half the sequences keep every frame well-formed, so the states behind the first frames are reached too
        boolean malformed = random.nextBoolean();
        int n = 1 + random.nextInt(32);
        for (int i = 0; i < n; i++) {
            wire.writeBytes(frame(random, malformed));
            frames++;
        }
        byte[] bytes = wire.toByteArray();
        for (int i = 0; i < bytes.length; i++) {
            if (bytes[i] == CANARY) {
                bytes[i] = (byte) (CANARY + 1);
            }
        }
        InetAddress local = InetAddress.getByAddress(new byte[] {127, 0, 0, (byte) (1 + sequences % 32)});
        try (Socket socket = new Socket()) {
            socket.bind(new InetSocketAddress(local, 0));
            socket.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 5000);
            socket.setSoTimeout((int) DEADLINE_MILLIS);
            Thread writer = Thread.ofVirtual().start(() -> {
                try {
                    socket.getOutputStream().write(bytes);
                    socket.shutdownOutput();
                } catch (IOException e) {
                    // the responder closed first
                }
            });
            boolean clean = readResponses(new DataInputStream(socket.getInputStream()));
            writer.join(DEADLINE_MILLIS);
            assertThat(writer.isAlive()).as("the responder took the sequence or closed (seed " + SEED + ")").isFalse();
            if (!clean) {
                endedByResponderFirst++;
            }
        }
    }

    /**
     * Reads the responder's hello and frames until its end of stream; false when the stream was reset. A silent
     * responder past the deadline is a hang.
     */
    private boolean readResponses(DataInputStream in) throws IOException {
        try {
            byte[] hello = new byte[TcpFrameCodec.HELLO_SIZE];
            in.readFully(hello);
            TcpFrameCodec.decodeHello(ByteBuffer.wrap(hello));
            byte[] header = new byte[TcpFrameCodec.HEADER_SIZE];
            while (true) {
                int first = in.read();
                if (first < 0) {
                    return true;
                }
                header[0] = (byte) first;
                in.readFully(header, 1, header.length - 1);
                TcpFrameCodec.Header h = TcpFrameCodec.decodeHeader(ByteBuffer.wrap(header), Integer.MAX_VALUE);
                byte[] body = new byte[h.length()];
                in.readFully(body);
                switch (h.type()) {
                    case TcpFrameCodec.READ_DATA -> {
                        for (byte b : body) {
                            if (b == CANARY) {
                                outOfRegionBytes++;
                            }
                        }
                    }
                    case TcpFrameCodec.READ_DONE, TcpFrameCodec.WRITE_ACK -> served++;
                    case TcpFrameCodec.ERROR -> refused++;
                    case TcpFrameCodec.SEND -> replies++;
                    default -> {
                        // PING, CLOSE
                    }
                }
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the responder neither answered nor closed within " + DEADLINE_MILLIS
                    + " ms (seed " + SEED + ", sequence " + sequences + ")", e);
        } catch (EOFException e) {
            return false;
        } catch (IOException e) {
            if (e.getMessage() != null && e.getMessage().contains("reset")) {
                return false;
            }
            throw e;
        }
    }

    // ---- generation ----

    private byte[] frame(Random r, boolean malformed) {
        byte[] f = switch (r.nextInt(malformed ? 16 : 14)) {
            case 0, 1 -> request(TcpFrameCodec.READ_REQ, id(r), validAddress(r), 1 + r.nextInt(REGION), regionKey, r);
            case 2 -> request(TcpFrameCodec.READ_REQ, id(r), readOnlyAddress + r.nextInt(REGION), r.nextInt(REGION), readOnlyKey, r);
            case 3 -> request(TcpFrameCodec.READ_REQ, id(r), wildAddress(r), wildLength(r), r.nextBoolean() ? regionKey : r.nextLong(), r);
            case 4, 5 -> write(r, TcpFrameCodec.WRITE_REQ, regionKey);
            case 6 -> write(r, TcpFrameCodec.WRITE_REQ, readOnlyKey);
            case 7 -> data(TcpFrameCodec.WRITE_DATA, id(r), 1 + r.nextInt(2048), r);
            case 8 -> data(TcpFrameCodec.READ_DATA, id(r), 1 + r.nextInt(2048), r);
            case 9 -> empty(r.nextBoolean() ? TcpFrameCodec.READ_DONE : TcpFrameCodec.WRITE_ACK, id(r));
            case 10 -> error(id(r), r);
            case 11, 12 -> message(r);
            case 13 -> empty(r.nextInt(4) == 0 ? TcpFrameCodec.CLOSE : TcpFrameCodec.PING, id(r));
            case 14 -> {
                byte[] garbage = new byte[1 + r.nextInt(48)];
                r.nextBytes(garbage);
                yield garbage;
            }
            default -> {
                byte[] valid = request(TcpFrameCodec.READ_REQ, id(r), validAddress(r), 1 + r.nextInt(64), regionKey, r);
                yield r.nextBoolean() ? truncateOrLengthen(r, valid) : valid;
            }
        };
        if (malformed && r.nextInt(8) == 0) {
            mutate(r, f);
        }
        return f;
    }

    /** Small ids collide: duplicates and answers to the peer's own requests. */
    private static long id(Random r) {
        return r.nextInt(4) == 0 ? r.nextLong() : r.nextInt(6);
    }

    private long validAddress(Random r) {
        return regionAddress + r.nextInt(REGION);
    }

    private long wildAddress(Random r) {
        return switch (r.nextInt(5)) {
            case 0 -> regionAddress - 1 - r.nextInt(REGION);
            case 1 -> regionAddress + REGION - r.nextInt(8);
            case 2 -> Long.MAX_VALUE - r.nextInt(16);
            case 3 -> r.nextLong();
            default -> regionAddress + r.nextInt(REGION);
        };
    }

    private static long wildLength(Random r) {
        return switch (r.nextInt(5)) {
            case 0 -> -1 - r.nextInt(1000);
            case 1 -> Long.MAX_VALUE - r.nextInt(16);
            case 2 -> 1L << (20 + r.nextInt(20));
            case 3 -> 0;
            default -> REGION + r.nextInt(64);
        };
    }

    private static byte[] request(byte type, long id, long address, long length, long key, Random r) {
        return TcpFrameCodec.encodeRequest(type, id, address, length, key).array();
    }

    /** A write request and some data for it: all of it, part of it, or more than announced. */
    private byte[] write(Random r, byte type, long key) {
        long id = id(r);
        int length = r.nextInt(REGION / 2);
        long address = r.nextInt(6) == 0 ? wildAddress(r) : regionAddress + r.nextInt(REGION - length + 1);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes(request(type, id, address, length, key, r));
        int toSend = switch (r.nextInt(4)) {
            case 0 -> r.nextInt(length + 1);
            case 1 -> length + 1 + r.nextInt(64);
            default -> length;
        };
        while (toSend > 0) {
            int chunk = 1 + r.nextInt(toSend);
            out.writeBytes(data(TcpFrameCodec.WRITE_DATA, r.nextInt(10) == 0 ? id(r) : id, chunk, r));
            toSend -= chunk;
        }
        return out.toByteArray();
    }

    private static byte[] data(byte type, long id, int length, Random r) {
        ByteBuffer b = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE + length);
        TcpFrameCodec.putHeader(b, type, length, id);
        for (int i = 0; i < length; i++) {
            b.put(safe(r.nextInt(REGION)));
        }
        return b.array();
    }

    private static byte[] empty(byte type, long id) {
        return TcpFrameCodec.encodeEmpty(type, id).array();
    }

    private static byte[] error(long id, Random r) {
        ByteBuffer b = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE + 1 + 8);
        TcpFrameCodec.putHeader(b, TcpFrameCodec.ERROR, 9, id);
        b.put((byte) r.nextInt(8)).putLong(r.nextLong());
        return b.array();
    }

    /** A two-sided message: plain, an echo request, a reply to nothing, or a broken header. */
    private static byte[] message(Random r) {
        int bodyLength = r.nextInt(64);
        byte kind = (byte) (1 + r.nextInt(3));
        ByteBuffer m = ByteBuffer.allocate(16 + bodyLength);
        m.put((byte) (r.nextInt(10) == 0 ? 2 : 1)).put(kind).put((byte) (r.nextInt(10) == 0 ? 1 : 0)).put((byte) 0)
                .putInt(r.nextInt(5) == 0 ? ECHO + 1 : ECHO).putLong(r.nextInt(8));
        for (int i = 0; i < bodyLength; i++) {
            m.put(safe(r.nextInt()));
        }
        int length = r.nextInt(8) == 0 ? r.nextInt(16) : m.capacity();
        ByteBuffer f = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE + length);
        TcpFrameCodec.putHeader(f, TcpFrameCodec.SEND, length, 0);
        return f.put(m.array(), 0, length).array();
    }

    private static byte[] truncateOrLengthen(Random r, byte[] frame) {
        ByteBuffer b = ByteBuffer.wrap(frame);
        b.putInt(4, r.nextBoolean() ? r.nextInt(TcpFrameCodec.REQUEST_BODY_SIZE) : r.nextInt());
        return r.nextBoolean() ? frame : java.util.Arrays.copyOf(frame, r.nextInt(frame.length));
    }

    private static void mutate(Random r, byte[] bytes) {
        int flips = 1 + r.nextInt(3);
        for (int i = 0; i < flips && bytes.length > 0; i++) {
            int at = r.nextInt(Math.min(bytes.length, r.nextBoolean() ? TcpFrameCodec.HEADER_SIZE : bytes.length));
            bytes[at] ^= (byte) (1 << r.nextInt(8));
        }
    }
}
