package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
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
 * on a peer that does not read. Queued turns go out together, in one gathering write. Over TLS the writer thread
 * writes everything, blocking as needed. Items that stream large transfers write one chunk per turn and go to the
 * back of the queue, so other frames interleave. Anything queued once the connection finished is aborted instead
 * of written.
 */
final class OutgoingFrames implements FrameChannel.Output {

    private final TcpConnection connection;
    private final FrameChannel channel;
    /** Plain socket: turns are written without blocking by whoever has one, else by the writer thread. */
    private final boolean inline;
    /** Held while writing to the socket, so turns never interleave; the queue is polled only under it. */
    private final ReentrantLock writing = new ReentrantLock();
    /** Turns written together at most: a gathering write stays far below the system's limit of buffers. */
    static final int MAX_GATHERED_TURNS = 32;
    private final ConcurrentLinkedDeque<Outgoing> queue = new ConcurrentLinkedDeque<>();
    /**
     * Turns begun and not all on the socket yet, oldest first: finished before anything queued. Under {@link #writing}.
     */
    private final ArrayDeque<Begun> begun = new ArrayDeque<>();
    /** Whether {@link #begun} holds a turn; for threads that do not hold the lock. */
    private volatile boolean turnsBegun;
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
    /** The same bytes over every connection of the transport, for its budget. */
    private final AtomicLong transportUnsentResponseBytes;
    private volatile long lastWriteNanos = System.nanoTime();

    OutgoingFrames(TcpConnection connection, FrameChannel channel, AtomicLong transportUnsentResponseBytes) {
        this.connection = connection;
        this.channel = channel;
        this.transportUnsentResponseBytes = transportUnsentResponseBytes;
        this.inline = channel.writesWithoutBlocking();
    }

    /** Whether the connection needs a writer thread: only where turns cannot be written without blocking. */
    boolean needsWriterThread() {
        return !inline;
    }

    /**
     * Queues a message frame of {@code message}'s buffers, as they are (kept until written or aborted), and writes
     * what the socket takes now, unless {@code more} frames follow from the caller, which then writes them together.
     */
    CompletableFuture<Void> sendMessage(int maxMessageSize, boolean more, ByteBuffer... message) {
        long length = 0;
        for (ByteBuffer b : message) {
            length += b.remaining();
        }
        if (length > maxMessageSize) {
            return CompletableFuture.failedFuture(new IllegalArgumentException("message of " + length
                    + " bytes exceeds max-message-size " + maxMessageSize));
        }
        ByteBuffer[] frame = new ByteBuffer[message.length + 1];
        frame[0] = TcpFrameCodec.encodeSendHeader((int) length);
        System.arraycopy(message, 0, frame, 1, message.length);
        CompletableFuture<Void> done = new CompletableFuture<>();
        queue.addLast(new Control(done, frame));
        queued(!more);
        return done;
    }

    /** Queues {@code o} behind everything queued and, on a plain socket, writes what the socket takes now. */
    void enqueue(Outgoing o) {
        queue.addLast(o);
        queued(true);
    }

    /** After queueing: writes now ({@code writeNow}, plain socket) or wakes the writer thread (TLS). */
    private void queued(boolean writeNow) {
        if (!inline) {
            wakeWriter();
        } else if (writeNow) {
            flush();
        }
        if (connection.isFinished()) {
            abortQueued();
        }
    }

    private boolean pending() {
        return turnsBegun || !queue.isEmpty();
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
                connection.roomAwaited(); // so the reader waits for room too
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
     * Under {@link #writing}: writes the turns begun, then queued turns, until nothing is left (true) or, when it may
     * not block, until the socket is full (false; what it did not take stays {@link #begun}). Without blocking, up to
     * {@link #MAX_GATHERED_TURNS} turns go out in one gathering write: the responses to a burst of requests, or a
     * batch of requests, cost one system call, not one each. The writer thread (TLS) writes one turn at a time.
     */
    private boolean writeQueued(boolean mayBlock) throws IOException {
        int most = mayBlock ? 1 : MAX_GATHERED_TURNS;
        while (true) {
            while (begun.size() < most) {
                Outgoing o = queue.pollFirst();
                if (o == null) {
                    break;
                }
                Begun b = new Begun(o);
                begun.addLast(b); // aborted if its turn fails
                turnsBegun = true;
                b.turn = o.nextTurn();
            }
            if (begun.isEmpty()) {
                return true;
            }
            ByteBuffer[] turns = gathered();
            boolean all = true;
            if (mayBlock) {
                writeFully(turns);
            } else {
                all = tryWrite(turns);
            }
            endWrittenTurns();
            if (!all) {
                return false;
            }
        }
    }

    /** The buffers of every turn begun, in order. */
    private ByteBuffer[] gathered() {
        if (begun.size() == 1) {
            return begun.peekFirst().turn;
        }
        int n = 0;
        for (Begun b : begun) {
            n += b.turn.length;
        }
        ByteBuffer[] all = new ByteBuffer[n];
        int i = 0;
        for (Begun b : begun) {
            System.arraycopy(b.turn, 0, all, i, b.turn.length);
            i += b.turn.length;
        }
        return all;
    }

    /** Under {@link #writing}: ends the turns now all on the socket, oldest first; an item with more goes to the back. */
    private void endWrittenTurns() {
        Begun b;
        while ((b = begun.peekFirst()) != null && remaining(b.turn) == 0) {
            begun.pollFirst();
            if (b.item.turnWritten()) {
                queue.addLast(b.item);
            }
        }
        turnsBegun = !begun.isEmpty();
    }

    /** Under {@link #writing}: the socket failed; the connection ends and the turns begun are aborted. */
    private void failWriting(Throwable e) {
        connection.fail(e);
        abortBegun();
    }

    /** Under {@link #writing}. */
    private void abortBegun() {
        Begun b;
        while ((b = begun.pollFirst()) != null) {
            b.item.abort(connection.pendingFailure());
        }
        turnsBegun = false;
    }

    /**
     * Queues a response to one of the peer's requests, counted until written or aborted, so the reader can stop
     * taking requests from a peer that does not read its responses. Reader thread only. On a plain socket it goes out
     * at the reader's next {@link #flush}, which comes once no whole frame is left to dispatch (see
     * {@code TcpConnection#readLoop}): the responses to a burst of requests then leave in one write.
     */
    void enqueueResponse(Outgoing o, long bytes) {
        unsentResponses.incrementAndGet();
        unsentResponseBytes.addAndGet(bytes);
        transportUnsentResponseBytes.addAndGet(bytes);
        queue.addLast(new Response(o, bytes));
        queued(false);
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
            if (!turnsBegun && queue.isEmpty()) {
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
            abortBegun();
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

    /** An item whose turn was taken ({@link Outgoing#nextTurn}) and is being written. */
    private static final class Begun {
        final Outgoing item;
        ByteBuffer[] turn;

        Begun(Outgoing item) {
            this.item = item;
        }
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
                transportUnsentResponseBytes.addAndGet(-bytes);
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
