package io.rdma4j.core.tcp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;

/**
 * The socket as is. Blocking during the handshake; once frames flow it is non-blocking, so that any thread can
 * write without ever blocking on a peer that does not read ({@link OutgoingFrames}). The reader thread waits in a
 * selector for data and, while frames {@link Output#awaitsRoom await room}, for room to write them too: the thread
 * that reads the connection also finishes what the socket did not take at once.
 *
 * <p>Why not a reader that blocks in {@code read}, as NIO's blocking client does: a blocking socket needs a writer
 * thread, so that no caller and never the reader blocks on a peer that does not read, and each frame then costs a
 * hand-off to it. Measured on 2 cores ({@code PairedProbe}, three runs), that design did 0.77–0.87× this one's 64 B
 * reads and no better on 1 MiB (0.94–0.96× with one in flight, 0.97–1.06× with eight).
 */
final class PlainChannel implements FrameChannel {

    private final SocketChannel socket;
    private volatile boolean nonBlocking;
    private volatile Selector selector;
    private SelectionKey key;
    private Output output;
    /** The last read emptied the socket; reader thread only. */
    private boolean drained;
    /** The reader thread's scattering read's buffers. */
    private final ByteBuffer[] scatter = new ByteBuffer[2];

    PlainChannel(SocketChannel socket) {
        this.socket = socket;
    }

    @Override
    public void startFrames() throws IOException {
        socket.configureBlocking(false);
        Selector s = Selector.open();
        try {
            key = socket.register(s, SelectionKey.OP_READ);
        } catch (IOException | RuntimeException e) {
            s.close();
            throw e;
        }
        selector = s;
        nonBlocking = true;
    }

    @Override
    public void writeWhileWaiting(Output output) {
        this.output = output;
    }

    /** Reader thread only; see {@link #readWhenReady}. */
    @Override
    public int read(ByteBuffer dst) throws IOException {
        if (!nonBlocking) {
            return socket.read(dst);
        }
        return (int) readWhenReady(dst.remaining(), () -> socket.read(dst));
    }

    /** Reader thread only: one scattering read, so the frames behind a long payload come with it. */
    @Override
    public long read(ByteBuffer dst, ByteBuffer then) throws IOException {
        if (!nonBlocking) {
            return socket.read(dst);
        }
        scatter[0] = dst;
        scatter[1] = then;
        try {
            return readWhenReady((long) dst.remaining() + then.remaining(), () -> socket.read(scatter));
        } finally {
            scatter[0] = null;
            scatter[1] = null;
        }
    }

    /** The leader on a poller's thread: what has arrived, without waiting. */
    @Override
    public long tryRead(ByteBuffer dst) throws IOException {
        return socket.read(dst);
    }

    private interface SocketRead {
        long read() throws IOException;
    }

    /**
     * Reads at least one of the {@code asked} bytes. After a read that took less than it asked for, the socket was
     * empty: the next read waits for data first rather than try a read that would most likely find nothing (a system
     * call per wake-up saved).
     */
    private long readWhenReady(long asked, SocketRead read) throws IOException {
        while (true) {
            if (drained && asked > 0) {
                await(SelectionKey.OP_READ, 0);
            }
            long n = read.read();
            drained = n >= 0 && n < asked;
            if (n != 0 || asked == 0) {
                return n;
            }
        }
    }

    @Override
    public void awaitWritable(long millis) throws IOException {
        await(0, millis);
    }

    /** Waits for {@code ops}, and for room while output awaits it (then writes it); 0: no time limit. */
    private void await(int ops, long millis) throws IOException {
        boolean writing = output != null && output.awaitsRoom();
        key.interestOps(ops | (writing ? SelectionKey.OP_WRITE : 0));
        int ready = selector.select(millis);
        selector.selectedKeys().clear();
        if (!socket.isOpen()) {
            throw new ClosedChannelException();
        }
        if (writing && ready > 0 && key.isWritable()) {
            output.socketWritable();
        }
    }

    /** Blocking writes are the handshake's only: once frames flow, {@link #tryWrite} is the only way to write. */
    @Override
    public long write(ByteBuffer[] srcs) throws IOException {
        if (nonBlocking) {
            throw new IllegalStateException("frames on a plain socket are written without blocking");
        }
        return socket.write(srcs);
    }

    @Override
    public boolean writesWithoutBlocking() {
        return nonBlocking;
    }

    @Override
    public long tryWrite(ByteBuffer[] srcs) throws IOException {
        return socket.write(srcs);
    }

    @Override
    public void wakeUp() {
        Selector s = selector;
        if (s != null) {
            s.wakeup();
        }
    }

    @Override
    public void release() {
        Selector s = selector;
        if (s != null) {
            try {
                s.close();
            } catch (IOException ignored) {
                // nothing left to release
            }
        }
    }

    @Override
    public byte[] binding() {
        return new byte[0];
    }
}
