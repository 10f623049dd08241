package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The frames a connection has to write and the writer thread's loop that drains them. Items that stream
 * large transfers write one chunk per turn and go to the back of the queue, so other frames interleave.
 * Anything queued once the connection finished is aborted instead of written.
 */
final class OutgoingFrames {

    private final TcpConnection connection;
    private final FrameChannel channel;
    private final LinkedBlockingDeque<Outgoing> queue = new LinkedBlockingDeque<>();
    /** Responses to the peer's requests queued and not yet written, and their bytes: the reader's bounds. */
    private final AtomicInteger unsentResponses = new AtomicInteger();
    private final AtomicLong unsentResponseBytes = new AtomicLong();
    private volatile long lastWriteNanos = System.nanoTime();

    OutgoingFrames(TcpConnection connection, FrameChannel channel) {
        this.connection = connection;
        this.channel = channel;
    }

    void enqueue(Outgoing o) {
        queue.addLast(o);
        if (connection.isFinished()) {
            abortQueued();
        }
    }

    /**
     * Queues a response to one of the peer's requests, counted until written or aborted, so the reader can stop
     * taking requests from a peer that does not read its responses.
     */
    void enqueueResponse(Outgoing o, long bytes) {
        unsentResponses.incrementAndGet();
        unsentResponseBytes.addAndGet(bytes);
        enqueue(new Response(o, bytes));
    }

    int unsentResponses() {
        return unsentResponses.get();
    }

    long unsentResponseBytes() {
        return unsentResponseBytes.get();
    }

    /** When the writer last wrote to the socket ({@link System#nanoTime()}). */
    long lastWriteNanos() {
        return lastWriteNanos;
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
        } catch (InternalError e) {
            connection.fail(TcpConnection.memoryFault(e));
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
            lastWriteNanos = System.nanoTime();
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

    /** A response being counted; settles the count once when done or aborted and wakes a waiting reader. */
    private final class Response implements Outgoing {
        private final Outgoing response;
        private final long bytes;
        private boolean settled;

        Response(Outgoing response, long bytes) {
            this.response = response;
            this.bytes = bytes;
        }

        @Override
        public boolean writeTo(OutgoingFrames frames) throws IOException {
            boolean more;
            try {
                more = response.writeTo(frames);
            } catch (IOException | RuntimeException e) {
                settle();
                throw e;
            }
            if (!more) {
                settle();
            }
            return more;
        }

        @Override
        public void abort(ConnectionClosedException cause) {
            try {
                response.abort(cause);
            } finally {
                settle();
            }
        }

        private synchronized void settle() {
            if (!settled) {
                settled = true;
                unsentResponses.decrementAndGet();
                unsentResponseBytes.addAndGet(-bytes);
                connection.responseWritten();
            }
        }
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
