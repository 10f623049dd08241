package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.TransportMetrics;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The write queue of a tcp connection on its own, over a real loopback socket whose peer the test reads (or does not):
 * order, what waits while the socket is full and how it leaves (gathered, streamed items interleaved, a frame put
 * first), the response counts the reader's bounds use, and what happens to queued frames when the socket fails. The
 * connection that owns the queue is real and never started: this test plays its reader thread, calling
 * {@code socketWritable} as the reader does when the socket has room.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OutgoingFramesTest {

    /** Far more than the small socket buffers below hold, so the socket fills. */
    private static final int FILLER = 1 << 20;

    private TcpTransport transport;
    private ServerSocketChannel server;
    private SocketChannel peer;
    private SocketChannel socket;
    private TcpConnection connection;
    private CountingChannel channel;
    private AtomicLong transportUnsent;
    private OutgoingFrames outgoing;

    @BeforeEach
    void connect() throws IOException {
        TransportConfig config = TransportConfig.builder().provider("tcp").build();
        transport = new TcpTransport(config, TcpOptions.from(config), new TransportMetrics("tcp"));
        server = ServerSocketChannel.open();
        server.setOption(StandardSocketOptions.SO_RCVBUF, 4096);
        server.bind(new InetSocketAddress("127.0.0.1", 0));
        socket = SocketChannel.open();
        socket.setOption(StandardSocketOptions.SO_SNDBUF, 4096);
        socket.connect(server.getLocalAddress());
        peer = server.accept();
        channel = new CountingChannel(FrameChannel.plain(socket));
        connection = new TcpConnection(transport, socket, channel, () -> { });
        transportUnsent = new AtomicLong();
        outgoing = new OutgoingFrames(connection, channel, transportUnsent);
    }

    @AfterEach
    void close() throws IOException {
        connection.fail(new ConnectionClosedException("test over"));
        channel.release();
        peer.close();
        server.close();
        transport.close();
    }

    @Test
    void framesLeaveInOrderOnTheCallersThread() throws Exception {
        List<String> sent = List.of("one", "two", "three");
        for (String s : sent) {
            outgoing.enqueue(new OutgoingFrames.Control(frame(s)));
        }
        assertThat(outgoing.awaitsRoom()).isFalse();
        assertThat(readFromPeer(11)).isEqualTo("onetwothree");
        assertThat(channel.tryWrites).as("one write per frame: nothing was queued behind another").hasSize(3);
    }

    @Test
    void whatAFullSocketDoesNotTakeWaitsAndLeavesInOneGatheredWrite() throws Exception {
        CompletableFuture<Void> fillerDone = new CompletableFuture<>();
        outgoing.enqueue(new OutgoingFrames.Control(fillerDone, filler()));
        assertThat(outgoing.awaitsRoom()).as("the socket took part of the filler").isTrue();
        int writesWhileFull = channel.tryWrites.size();
        List<CompletableFuture<Void>> done = new ArrayList<>();
        for (String s : List.of("A", "B", "C", "D", "E")) {
            CompletableFuture<Void> d = new CompletableFuture<>();
            done.add(d);
            outgoing.enqueue(new OutgoingFrames.Control(d, frame(s)));
        }
        assertThat(channel.tryWrites).as("no write is tried while the socket is full").hasSize(writesWhileFull);
        assertThat(done).noneMatch(CompletableFuture::isDone);

        String received = drainWhilePlayingTheReader(FILLER + 5);
        assertThat(received).endsWith("ABCDE");
        assertThat(fillerDone).isCompleted();
        assertThat(done).allMatch(d -> d.isDone() && !d.isCompletedExceptionally());
        assertThat(channel.tryWrites).as("the rest of the filler and the five queued frames in one write")
                .anyMatch(buffers -> buffers == 6);
    }

    @Test
    void aStreamedItemWritesOneTurnAtATimeAndLetsOthersIn() throws Exception {
        outgoing.enqueue(new OutgoingFrames.Control(filler()));
        outgoing.enqueue(new Streamed("s1", "s2", "s3"));
        outgoing.enqueue(new OutgoingFrames.Control(frame("B")));
        outgoing.enqueueFirst(new OutgoingFrames.Control(frame("P")));
        String received = drainWhilePlayingTheReader(FILLER + 8);
        assertThat(received.substring(FILLER)).as("P first, then each turn of the stream with B after its first")
                .isEqualTo("Ps1Bs2s3");
    }

    @Test
    void responsesCountUntilWritten() throws Exception {
        outgoing.enqueueResponse(new OutgoingFrames.Control(frame("r1")), 2);
        outgoing.enqueueResponse(new OutgoingFrames.Control(frame("r2")), 2);
        assertThat(outgoing.unsentResponses()).as("responses wait for the reader's next flush").isEqualTo(2);
        assertThat(outgoing.unsentResponseBytes()).isEqualTo(4);
        assertThat(transportUnsent).as("the transport's budget counts them too").hasValue(4);
        assertThat(channel.tryWrites).isEmpty();

        outgoing.flush();
        assertThat(readFromPeer(4)).isEqualTo("r1r2");
        assertThat(channel.tryWrites).as("a burst of responses leaves in one write").containsExactly(2);
        assertThat(outgoing.unsentResponses()).isZero();
        assertThat(outgoing.unsentResponseBytes()).isZero();
        assertThat(transportUnsent).hasValue(0);
    }

    @Test
    void aFailedSocketEndsTheConnectionAndAbortsWhatWaits() throws Exception {
        outgoing.enqueue(new OutgoingFrames.Control(filler()));
        CompletableFuture<Void> queued = new CompletableFuture<>();
        outgoing.enqueue(new OutgoingFrames.Control(queued, frame("Q")));
        outgoing.enqueueResponse(new OutgoingFrames.Control(frame("R")), 1);
        peer.setOption(StandardSocketOptions.SO_LINGER, 0);
        peer.close(); // a reset: the next write fails

        while (connection.pendingFailure().getCause() == null) { // until a write meets the reset
            outgoing.socketWritable();
            Thread.sleep(1);
        }
        assertThat(connection.pendingFailure()).as("the write failed and failed the connection")
                .hasMessageContaining("failed");
        outgoing.abortAll(); // what the connection does once finished
        assertThat(queued).isCompletedExceptionally();
        assertThat(queued.exceptionNow()).isInstanceOf(ConnectionClosedException.class)
                .hasMessageContaining("connection to " + server.getLocalAddress());
        assertThat(outgoing.unsentResponses()).as("an aborted response is no longer counted").isZero();
        assertThat(transportUnsent).hasValue(0);
    }

    /** Reads exactly {@code bytes} from the peer. */
    private String readFromPeer(int bytes) throws IOException {
        ByteBuffer in = ByteBuffer.allocate(bytes);
        while (in.hasRemaining()) {
            if (peer.read(in) < 0) {
                break;
            }
        }
        return new String(in.array(), 0, in.position(), StandardCharsets.ISO_8859_1);
    }

    /** Reads {@code bytes} from the peer on another thread while telling the queue, as its reader would, that there is room. */
    private String drainWhilePlayingTheReader(int bytes) throws Exception {
        CompletableFuture<String> received = CompletableFuture.supplyAsync(() -> {
            try {
                return readFromPeer(bytes);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        while (!received.isDone()) {
            outgoing.socketWritable();
            Thread.sleep(1);
        }
        return received.get();
    }

    private static ByteBuffer frame(String s) {
        return ByteBuffer.wrap(s.getBytes(StandardCharsets.ISO_8859_1));
    }

    private static ByteBuffer filler() {
        byte[] bytes = new byte[FILLER];
        Arrays.fill(bytes, (byte) '.');
        return ByteBuffer.wrap(bytes);
    }

    /** An item written in several turns, as a large transfer streams its chunks. */
    private static final class Streamed implements OutgoingFrames.Outgoing {
        private final String[] turns;
        private int next;

        Streamed(String... turns) {
            this.turns = turns;
        }

        @Override
        public ByteBuffer[] nextTurn() {
            return new ByteBuffer[] {frame(turns[next])};
        }

        @Override
        public boolean turnWritten() {
            return ++next < turns.length;
        }

        @Override
        public void abort(ConnectionClosedException cause) {
        }
    }

    /** The plain socket channel, recording how many buffers each write without blocking was given. */
    private static final class CountingChannel implements FrameChannel {
        final List<Integer> tryWrites = new CopyOnWriteArrayList<>();
        private final FrameChannel plain;

        CountingChannel(FrameChannel plain) {
            this.plain = plain;
        }

        @Override
        public long tryWrite(ByteBuffer[] srcs) throws IOException {
            tryWrites.add((int) Arrays.stream(srcs).filter(ByteBuffer::hasRemaining).count());
            return plain.tryWrite(srcs);
        }

        @Override
        public boolean writesWithoutBlocking() {
            return plain.writesWithoutBlocking();
        }

        @Override
        public void startFrames() throws IOException {
            plain.startFrames();
        }

        @Override
        public void writeWhileWaiting(Output output) {
            plain.writeWhileWaiting(output);
        }

        @Override
        public void wakeUp() {
            plain.wakeUp();
        }

        @Override
        public void release() {
            plain.release();
        }

        @Override
        public int read(ByteBuffer dst) throws IOException {
            return plain.read(dst);
        }

        @Override
        public long write(ByteBuffer[] srcs) throws IOException {
            return plain.write(srcs);
        }

        @Override
        public byte[] binding() {
            return plain.binding();
        }
    }
}
