package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

/** Blocking reads from a connection's socket; used by its reader thread only. */
final class FrameInput {

    private final FrameChannel channel;
    private final InetSocketAddress remoteAddress;
    private final PendingOperations pending;
    private ByteBuffer scratch;
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

    void readFully(ByteBuffer buffer) throws IOException {
        while (buffer.hasRemaining()) {
            if (channel.read(buffer) < 0) {
                throw new ConnectionClosedException(remoteAddress + " closed the connection"
                        + (pending.isEmpty() ? "" : " with " + pending.size() + " operation(s) pending"));
            }
            lastReadNanos = System.nanoTime();
        }
    }

    long lastReadNanos() {
        return lastReadNanos;
    }

    /** Restarts the idle clock, as if bytes had just arrived. */
    void markRead() {
        lastReadNanos = System.nanoTime();
    }

    /** Reads and discards bytes nobody waits for any more (a failed request's data). */
    void drain(long length) throws IOException {
        if (scratch == null) {
            scratch = ByteBuffer.allocateDirect(64 << 10);
        }
        while (length > 0) {
            scratch.clear().limit((int) Math.min(scratch.capacity(), length));
            readFully(scratch);
            length -= scratch.limit();
        }
    }
}
