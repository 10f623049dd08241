package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingDeque;

/**
 * The frames a connection has to write and the writer thread's loop that drains them. Items that stream
 * large transfers write one chunk per turn and go to the back of the queue, so other frames interleave.
 * Anything queued once the connection finished is aborted instead of written.
 */
final class OutgoingFrames {

    private final TcpConnection connection;
    private final SocketChannel channel;
    private final LinkedBlockingDeque<Outgoing> queue = new LinkedBlockingDeque<>();

    OutgoingFrames(TcpConnection connection, SocketChannel channel) {
        this.connection = connection;
        this.channel = channel;
    }

    void enqueue(Outgoing o) {
        queue.addLast(o);
        if (connection.isFinished()) {
            abortQueued();
        }
    }

    /** Puts a frame ahead of everything queued. */
    void enqueueFirst(Outgoing o) {
        queue.addFirst(o);
    }

    /** The writer thread's body; runs until the connection interrupts it or the socket fails. */
    void writeLoop() {
        Outgoing current = null;
        try {
            while (true) {
                current = queue.takeFirst();
                if (current.writeTo(this)) {
                    queue.addLast(current);
                }
                current = null;
            }
        } catch (InterruptedException e) {
            // the connection's finish() stops the writer
        } catch (IOException | RuntimeException e) {
            connection.fail(e);
        } finally {
            if (current != null) {
                current.abort(connection.pendingFailure());
            }
            if (connection.isFinished()) {
                abortQueued();
            }
        }
    }

    void writeFully(ByteBuffer... buffers) throws IOException {
        long left = 0;
        for (ByteBuffer b : buffers) {
            left += b.remaining();
        }
        while (left > 0) {
            left -= channel.write(buffers);
        }
    }

    void abortQueued() {
        Outgoing o;
        while ((o = queue.pollFirst()) != null) {
            o.abort(connection.pendingFailure());
        }
    }

    /** Work for the writer thread; returns true when it has more to write (it is then queued again). */
    interface Outgoing {
        boolean writeTo(OutgoingFrames frames) throws IOException;

        void abort(ConnectionClosedException cause);
    }

    /** Whole frames written at once; {@code done} (if any) completes once written. */
    static final class Control implements Outgoing {
        final CompletableFuture<Void> done;
        final ByteBuffer[] buffers;

        Control(ByteBuffer... buffers) {
            this(null, buffers);
        }

        Control(CompletableFuture<Void> done, ByteBuffer... buffers) {
            this.done = done;
            this.buffers = buffers;
        }

        @Override
        public boolean writeTo(OutgoingFrames frames) throws IOException {
            frames.writeFully(buffers);
            if (done != null) {
                done.complete(null);
            }
            return false;
        }

        @Override
        public void abort(ConnectionClosedException cause) {
            if (done != null) {
                done.completeExceptionally(cause);
            }
        }
    }
}
