package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The frames a connection has to write. Whoever has a frame to send writes it on its own thread when the socket
 * is free and nothing is queued ahead of it, without blocking: a thread hand-off costs tens of microseconds on a
 * virtual machine, more than a small operation takes. What the socket does not take at once, and everything
 * queued behind it, the writer thread writes, blocking as needed; so the reader thread may serve requests inline
 * and still never blocks on a peer that does not read. Items that stream large transfers write one chunk per turn
 * and go to the back of the queue, so other frames interleave. Anything queued once the connection finished is
 * aborted instead of written.
 */
final class OutgoingFrames {

    private final TcpConnection connection;
    private final FrameChannel channel;
    /** Whether a turn may be tried without blocking from any thread (plain sockets; TLS goes through the writer). */
    private final boolean inline;
    /** Held while writing to the socket, so turns never interleave; the queue is polled only under it. */
    private final ReentrantLock writing = new ReentrantLock();
    private final ConcurrentLinkedDeque<Outgoing> queue = new ConcurrentLinkedDeque<>();
    /** An item whose turn the socket took only part of: the writer finishes it before anything else. */
    private volatile Outgoing current;
    private ByteBuffer[] currentTurn;
    private volatile Thread writer;
    private volatile boolean writerWaiting;
    /** Responses to the peer's requests queued and not yet written, and their bytes: the reader's bounds. */
    private final AtomicInteger unsentResponses = new AtomicInteger();
    private final AtomicLong unsentResponseBytes = new AtomicLong();
    private volatile long lastWriteNanos = System.nanoTime();

    OutgoingFrames(TcpConnection connection, FrameChannel channel) {
        this.connection = connection;
        this.channel = channel;
        this.inline = channel.writesWithoutBlocking();
    }

    /** Writes {@code o} now if the socket is free and nothing waits ahead of it, else queues it for the writer. */
    void enqueue(Outgoing o) {
        if (inline && writing.tryLock()) {
            boolean written = false;
            try {
                if (current == null && queue.isEmpty() && !connection.isFinished()) {
                    written = true;
                    writeInline(o);
                }
            } finally {
                writing.unlock();
            }
            if (written) {
                if (current != null || !queue.isEmpty()) {
                    wakeWriter();
                }
                return;
            }
        }
        queue.addLast(o);
        wakeWriter();
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

    /** When a frame was last written to the socket ({@link System#nanoTime()}). */
    long lastWriteNanos() {
        return lastWriteNanos;
    }

    /** Puts a frame ahead of everything queued (after a turn already begun). */
    void enqueueFirst(Outgoing o) {
        queue.addFirst(o);
        wakeWriter();
    }

    /** Under {@link #writing}, nothing ahead: one turn of {@code o} without blocking; the writer takes the rest. */
    private void writeInline(Outgoing o) {
        try {
            ByteBuffer[] turn = o.nextTurn();
            if (!tryWrite(turn)) {
                currentTurn = turn;
                current = o;
                return;
            }
            if (o.turnWritten()) {
                queue.addLast(o);
            }
        } catch (IOException | RuntimeException e) {
            connection.fail(e);
            o.abort(connection.pendingFailure());
        } catch (InternalError e) {
            connection.fail(TcpConnection.memoryFault(e));
            o.abort(connection.pendingFailure());
        }
    }

    /** The writer thread's body; runs until the connection interrupts it or the socket fails. */
    void writeLoop() {
        writer = Thread.currentThread();
        try {
            while (!Thread.currentThread().isInterrupted()) {
                boolean wrote;
                writing.lock();
                try {
                    wrote = writeNext();
                } finally {
                    writing.unlock();
                }
                if (!wrote) {
                    awaitWork();
                }
            }
        } catch (IOException | RuntimeException e) {
            connection.fail(e);
        } catch (InternalError e) {
            connection.fail(TcpConnection.memoryFault(e));
        } finally {
            writing.lock();
            try {
                Outgoing o = current;
                current = null;
                currentTurn = null;
                if (o != null) {
                    o.abort(connection.pendingFailure());
                }
            } finally {
                writing.unlock();
            }
            if (connection.isFinished()) {
                abortQueued();
            }
        }
    }

    /** Under {@link #writing}: finishes the turn begun, else writes the next item's turn; false if nothing is queued. */
    private boolean writeNext() throws IOException {
        Outgoing o = current;
        ByteBuffer[] turn = currentTurn;
        if (o == null) {
            o = queue.pollFirst();
            if (o == null) {
                return false;
            }
            current = o; // aborted by the loop if the turn fails
            turn = o.nextTurn();
            currentTurn = turn;
        }
        writeFully(turn);
        current = null;
        currentTurn = null;
        if (o.turnWritten()) {
            queue.addLast(o);
        }
        return true;
    }

    private void awaitWork() {
        writerWaiting = true;
        try {
            if (current == null && queue.isEmpty()) {
                LockSupport.park(this);
            }
        } finally {
            writerWaiting = false;
        }
    }

    private void wakeWriter() {
        Thread w = writer;
        if (writerWaiting && w != null) {
            LockSupport.unpark(w);
        }
    }

    private void writeFully(ByteBuffer[] buffers) throws IOException {
        long left = remaining(buffers);
        while (left > 0) {
            left -= channel.write(buffers);
            lastWriteNanos = System.nanoTime();
        }
    }

    /** Writes what the socket takes now; true if that was all of {@code buffers}. */
    private boolean tryWrite(ByteBuffer[] buffers) throws IOException {
        long left = remaining(buffers);
        while (left > 0) {
            long n = channel.tryWrite(buffers);
            if (n == 0) {
                return false;
            }
            left -= n;
            lastWriteNanos = System.nanoTime();
        }
        return true;
    }

    private static long remaining(ByteBuffer[] buffers) {
        long left = 0;
        for (ByteBuffer b : buffers) {
            left += b.remaining();
        }
        return left;
    }

    void abortQueued() {
        Outgoing o;
        while ((o = queue.pollFirst()) != null) {
            o.abort(connection.pendingFailure());
        }
    }

    /**
     * Something to write, one turn at a time: whole frames, which go to the socket before any other item's.
     * The turn's buffers must stay valid (and what they point into pinned) until {@link #turnWritten} or
     * {@link #abort}.
     */
    interface Outgoing {
        ByteBuffer[] nextTurn();

        /** The last turn is all on the socket; true when the item has another turn (it is then queued again). */
        boolean turnWritten();

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
        public ByteBuffer[] nextTurn() {
            return response.nextTurn();
        }

        @Override
        public boolean turnWritten() {
            boolean more = response.turnWritten();
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
        public ByteBuffer[] nextTurn() {
            return buffers;
        }

        @Override
        public boolean turnWritten() {
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
