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
 * The frames a connection has to write, in order. On a plain socket (non-blocking once frames flow) whoever has a
 * frame to send writes it on its own thread, together with whatever is queued ahead of it, as far as the socket
 * takes it without blocking ({@link #flush}): a thread hand-off costs tens of microseconds on a virtual machine,
 * more than a small operation takes. What a full socket does not take waits here, and the connection's reader
 * thread writes it when the socket can take more (it waits for both directions at once), so nobody ever blocks
 * on a peer that does not read. Over TLS the writer thread writes everything, blocking as needed. Items that stream
 * large transfers write one chunk per turn and go to the back of the queue, so other frames interleave. Anything
 * queued once the connection finished is aborted instead of written.
 */
final class OutgoingFrames implements FrameChannel.Output {

    private final TcpConnection connection;
    private final FrameChannel channel;
    /** Plain socket: turns are written without blocking by whoever has one, else by the writer thread. */
    private final boolean inline;
    /** Held while writing to the socket, so turns never interleave; the queue is polled only under it. */
    private final ReentrantLock writing = new ReentrantLock();
    private final ConcurrentLinkedDeque<Outgoing> queue = new ConcurrentLinkedDeque<>();
    /** An item whose turn is being written (perhaps only partly yet): finished before anything else. */
    private volatile Outgoing current;
    private ByteBuffer[] currentTurn;
    private volatile Thread writer;
    private volatile boolean writerWaiting;
    /**
     * The socket took no more at the last try: nobody tries again until the reader thread saw it writable
     * ({@link #socketWritable}), which saves a failing system call per frame while a peer reads slowly.
     */
    private volatile boolean socketFull;
    /** Responses to the peer's requests queued and not yet written, and their bytes: the reader's bounds. */
    private final AtomicInteger unsentResponses = new AtomicInteger();
    private final AtomicLong unsentResponseBytes = new AtomicLong();
    private volatile long lastWriteNanos = System.nanoTime();

    OutgoingFrames(TcpConnection connection, FrameChannel channel) {
        this.connection = connection;
        this.channel = channel;
        this.inline = channel.writesWithoutBlocking();
    }

    /** Whether the connection needs a writer thread: only where turns cannot be written without blocking. */
    boolean needsWriterThread() {
        return !inline;
    }

    /** Queues {@code o} behind everything queued and, on a plain socket, writes what the socket takes now. */
    void enqueue(Outgoing o) {
        queue.addLast(o);
        if (inline) {
            flush();
        } else {
            wakeWriter();
        }
        if (connection.isFinished()) {
            abortQueued();
        }
    }

    private boolean pending() {
        return current != null || !queue.isEmpty();
    }

    @Override
    public boolean awaitsRoom() {
        return socketFull;
    }

    /**
     * Writes the turn begun and then queued turns, in order, as far as the socket takes them without blocking; on
     * any thread. If another thread is writing, that one goes on, and looks at the queue again once it stopped.
     * When the socket is full, the reader thread is woken to go on when it can take more.
     */
    @Override
    public void flush() {
        if (!inline || writing.isHeldByCurrentThread() || socketFull) {
            // the writer thread writes everything; or a turn's completion queued more, and the loop below goes
            // on; or the reader thread goes on once the socket has room
            return;
        }
        while (pending() && writing.tryLock()) {
            boolean full;
            try {
                full = !writeQueued(false);
            } catch (IOException | RuntimeException e) {
                failWriting(e);
                return;
            } catch (InternalError e) {
                failWriting(TcpConnection.memoryFault(e));
                return;
            } finally {
                writing.unlock();
            }
            if (full) {
                socketFull = true;
                channel.wakeUp(); // so the reader thread waits for room too
                return;
            }
        }
    }

    @Override
    public void socketWritable() {
        socketFull = false;
        flush();
    }

    /**
     * Under {@link #writing}: writes the turn begun, then queued turns, until nothing is left (true) or, when it
     * may not block, until the socket is full (false; the turn begun stays {@link #current}).
     */
    private boolean writeQueued(boolean mayBlock) throws IOException {
        while (true) {
            Outgoing o = current;
            if (o == null) {
                o = queue.pollFirst();
                if (o == null) {
                    return true;
                }
                current = o; // aborted if its turn fails
                currentTurn = o.nextTurn();
            }
            if (mayBlock) {
                writeFully(currentTurn);
            } else if (!tryWrite(currentTurn)) {
                return false;
            }
            current = null;
            currentTurn = null;
            if (o.turnWritten()) {
                queue.addLast(o);
            }
        }
    }

    /** Under {@link #writing}: the socket failed; the connection ends and the turn being written is aborted. */
    private void failWriting(Throwable e) {
        Outgoing o = current;
        current = null;
        currentTurn = null;
        connection.fail(e);
        if (o != null) {
            o.abort(connection.pendingFailure());
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
        if (inline) {
            flush();
        } else {
            wakeWriter();
        }
    }

    /** The writer thread's body (TLS); runs until the connection interrupts it or the socket fails. */
    void writeLoop() {
        writer = Thread.currentThread();
        try {
            while (!Thread.currentThread().isInterrupted()) {
                writing.lock();
                try {
                    writeQueued(true);
                } finally {
                    writing.unlock();
                }
                awaitWork();
            }
        } catch (IOException | RuntimeException e) {
            connection.fail(e);
        } catch (InternalError e) {
            connection.fail(TcpConnection.memoryFault(e));
        } finally {
            if (connection.isFinished()) {
                abortAll();
            }
        }
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

    /** Aborts the turn begun and everything queued; the connection finished. */
    void abortAll() {
        writing.lock(); // held only while writing without blocking, or by the writer thread, stopped by now
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
        abortQueued();
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
