package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

/**
 * Blocking reads from a connection's socket; used by its reader thread only. Small reads (frame headers, requests,
 * small data) come from a buffer that one socket read fills with whatever has arrived, so a burst of small frames
 * costs one system call, not two per frame; long reads land straight in their destination (a read's sink, a
 * written region) without a copy, and bring the frames behind them into the buffer in the same call.
 */
final class FrameInput {

    /**
     * Small, so that a fill ahead of a large data frame copies little of its data (the rest lands straight in the
     * sink); still a hundred request frames per fill.
     */
    private static final int BUFFER_SIZE = 4 << 10;
    /** Reads of at least this many bytes bypass the buffer. */
    private static final int DIRECT_READ_MIN = BUFFER_SIZE;

    private final FrameChannel channel;
    private final InetSocketAddress remoteAddress;
    private final PendingOperations pending;
    /** Bytes read from the socket and not consumed yet, in read mode. */
    private final ByteBuffer buffered = ByteBuffer.allocateDirect(BUFFER_SIZE).flip();
    /** When bytes last arrived ({@link System#nanoTime()}); the idle check reads it from another thread. */
    private volatile long lastReadNanos = System.nanoTime();

    FrameInput(FrameChannel channel, InetSocketAddress remoteAddress, PendingOperations pending) {
        this.channel = channel;
        this.remoteAddress = remoteAddress;
        this.pending = pending;
    }

    ByteBuffer readBody(ByteBuffer body, TcpFrameCodec.Header h) throws IOException {
        body.clear().limit(h.length());
        readFully(body);
        return body.flip();
    }

    void readFully(ByteBuffer dst) throws IOException {
        takeBuffered(dst);
        while (dst.hasRemaining()) {
            if (dst.remaining() >= DIRECT_READ_MIN) {
                readDirect(dst);
            } else {
                fill();
                takeBuffered(dst);
            }
        }
    }

    private void takeBuffered(ByteBuffer dst) {
        int n = Math.min(buffered.remaining(), dst.remaining());
        if (n > 0) {
            dst.put(buffered.slice(buffered.position(), n));
            buffered.position(buffered.position() + n);
        }
    }

    /** Reads what has arrived (at least a byte) into the empty buffer. */
    private void fill() throws IOException {
        buffered.clear();
        try {
            arrived(channel.read(buffered));
        } finally {
            buffered.flip();
        }
    }

    /**
     * Reads into {@code dst} without a copy, and into the emptied buffer whatever arrived behind it: the frames that
     * follow a payload then cost no system call of their own.
     */
    private void readDirect(ByteBuffer dst) throws IOException {
        buffered.clear();
        try {
            arrived(channel.read(dst, buffered));
        } finally {
            buffered.flip();
        }
    }

    /** Takes the result of a socket read: {@code n} bytes arrived, or the stream ended (negative). */
    private void arrived(long n) throws ConnectionClosedException {
        if (n < 0) {
            throw new ConnectionClosedException(remoteAddress + " closed the connection"
                    + (pending.isEmpty() ? "" : " with " + pending.size() + " operation(s) pending"));
        }
        lastReadNanos = System.nanoTime();
    }

    /** Whether the next frame, header and payload, is buffered whole: reading it will not wait for the socket. */
    boolean holdsWholeFrame() {
        return TcpFrameCodec.holdsWholeFrame(buffered);
    }

    long lastReadNanos() {
        return lastReadNanos;
    }

    /** Restarts the idle clock, as if bytes had just arrived. */
    void markRead() {
        lastReadNanos = System.nanoTime();
    }

    // ---- without waiting, for the leader on a poller's thread ----

    /** Whether a frame of {@code length} payload bytes fits the buffer whole, so reading it needs no other thread. */
    static boolean fitsBuffer(int length) {
        return length <= BUFFER_SIZE - TcpFrameCodec.HEADER_SIZE;
    }

    /**
     * Appends to the buffered bytes what has arrived and fits, without waiting; returns the bytes read (0 when the
     * buffer is full). Fewer than there was room for: the socket is empty.
     */
    long tryFill() throws IOException {
        buffered.compact();
        try {
            if (!buffered.hasRemaining()) {
                return 0;
            }
            long n = channel.tryRead(buffered);
            if (n != 0) {
                arrived(n);
            }
            return n;
        } finally {
            buffered.flip();
        }
    }

    /** Room the next {@link #tryFill} has. */
    int fillRoom() {
        return BUFFER_SIZE - buffered.remaining();
    }

    /** The next frame's header, validated and not consumed; null while not all of it is buffered. */
    TcpFrameCodec.Header peekHeader(int maxMessageSize) {
        if (buffered.remaining() < TcpFrameCodec.HEADER_SIZE) {
            return null;
        }
        return TcpFrameCodec.decodeHeader(buffered.slice(buffered.position(), TcpFrameCodec.HEADER_SIZE), maxMessageSize);
    }

    /** Consumes the header {@link #peekHeader} returned. */
    void skipHeader() {
        buffered.position(buffered.position() + TcpFrameCodec.HEADER_SIZE);
    }

    /** Fills {@code dst} from the buffer and then the socket as far as bytes have arrived; true once it is full. */
    boolean tryReadFully(ByteBuffer dst) throws IOException {
        takeBuffered(dst);
        while (dst.hasRemaining()) {
            long n = channel.tryRead(dst);
            if (n == 0) {
                return false;
            }
            arrived(n);
        }
        return true;
    }

    /** Reads and discards bytes nobody waits for any more (a failed request's data). */
    void drain(long length) throws IOException {
        while (length > 0) {
            if (!buffered.hasRemaining()) {
                fill();
            }
            int n = (int) Math.min(buffered.remaining(), length);
            buffered.position(buffered.position() + n);
            length -= n;
        }
    }
}
