package io.rdma4j.core;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A reliable connection to one peer. One-sided {@link #read}/{@link #write} reach the peer's registered
 * regions without involving the peer's application; {@link #send}/{@link #receive} carry small control
 * messages (up to {@link TransportConfig#maxMessageSize()}), in order; {@link #request} sends a request to
 * the peer listener's {@link RequestHandler} and completes with its reply.
 *
 * <p>Every operation is asynchronous. At most {@link TransportConfig#maxOutstandingOperations()} are in
 * flight per connection: beyond that the calling thread waits (back-pressure), and fails with
 * {@link RdmaTimeoutException} if no slot frees up within the operation timeout. Futures complete off
 * the provider's I/O threads, so callbacks may block or issue further operations.
 *
 * <p>Failures: {@link RemoteAccessException} (key, bounds, rights), {@link RdmaTimeoutException},
 * {@link ConnectionClosedException} (closed or peer died), {@link ProtocolException}; the sink's content
 * is undefined after a failed read. A timeout, or a rejection by the peer (as opposed to one caught by
 * the local pre-check against the descriptor), closes the connection, exactly as a queue pair of an
 * RDMA NIC enters the error state: operations still pending fail with {@link ConnectionClosedException}
 * and the caller reconnects.
 */
public interface RdmaConnection extends AutoCloseable {

    /**
     * Reads {@code sink.byteSize()} bytes from {@code remoteOffset} of the remote region into
     * {@code sink}, which must lie inside a region registered with this transport with
     * {@link Access#LOCAL_WRITE}. Any length is allowed: large reads are split as the provider needs. The sink,
     * like every local buffer of an operation, must be usable from the transport's threads: a segment of
     * {@code Arena.ofConfined()} fails the operation with {@link IllegalArgumentException}.
     */
    CompletableFuture<Void> read(RegionDescriptor remote, long remoteOffset, MemorySegment sink);

    /**
     * Many reads at once (providers post them together where they can). The future completes when all
     * have; it fails with the first failure, after every read has finished one way or the other.
     */
    CompletableFuture<Void> readAll(List<ReadRequest> reads);

    /**
     * {@link #read} that returns once the bytes are in {@code sink}, the lowest-latency way to make a small
     * read: the calling thread waits for the completion itself. On the verbs provider it polls the
     * connection's completion queue (no hand-off to and from the progress thread, as perftest's
     * {@code ib_read_lat} does); elsewhere it blocks on the operation. Throws what {@link #read}'s future
     * fails with; an interrupt does not cut the wait short (the read owns the sink until it finished) but
     * stays set.
     */
    void readAndWait(RegionDescriptor remote, long remoteOffset, MemorySegment sink);

    /**
     * Writes {@code source} to {@code remoteOffset} of the remote region, which must have been registered
     * with {@link Access#REMOTE_WRITE}. {@code source} must lie inside a region registered with this
     * transport.
     */
    CompletableFuture<Void> write(RegionDescriptor remote, long remoteOffset, MemorySegment source);

    /** Sends a message of at most {@link TransportConfig#maxMessageSize()} bytes; copied before return. */
    CompletableFuture<Void> send(ByteBuffer message);

    /**
     * {@link #send(ByteBuffer)} whose future is completed by a task run on {@code executor}, for an application with
     * event loops of its own (a Netty channel's): the completion goes from the provider's thread straight to
     * {@code executor}, not through the transport's completion threads, which saves waking one of them per message.
     * The same rules as {@link #receive(java.util.concurrent.Executor)}: {@code executor.execute} must return at once,
     * and should it reject the task, the completion threads complete the future.
     */
    default CompletableFuture<Void> send(ByteBuffer message, java.util.concurrent.Executor executor) {
        return send(message);
    }

    /**
     * {@link #send(ByteBuffer, java.util.concurrent.Executor)} without the copy where the provider can do without:
     * the transport may read {@code message} until the returned future completes, and the caller leaves its bytes
     * unchanged (and its memory allocated) until then, whether the send succeeds or fails. The tcp provider then writes
     * the caller's bytes straight to the socket (a direct buffer without any copy); verbs copies them into registered
     * memory as {@code send} does.
     */
    default CompletableFuture<Void> sendInPlace(ByteBuffer message, java.util.concurrent.Executor executor) {
        return send(message, executor);
    }

    /**
     * {@link #sendInPlace(ByteBuffer, java.util.concurrent.Executor)} that may go out together with the sends that
     * follow it: with {@code more}, the provider may hold the message back until a send without {@code more} or
     * {@link #flushSends()}, to write them all in one system call (the tcp provider's gathering write), as a socket's
     * {@code MSG_MORE} does. A caller that sends with {@code more} ends the run with one of the two, also when it
     * stops early; a send that has to wait for an operation slot writes what is held first.
     */
    default CompletableFuture<Void> sendInPlace(ByteBuffer message, java.util.concurrent.Executor executor, boolean more) {
        return sendInPlace(message, executor);
    }

    /** Writes the sends held back by {@code more}; see {@link #sendInPlace(ByteBuffer, java.util.concurrent.Executor, boolean)}. */
    default void flushSends() {
    }

    /**
     * Whether {@link #sendInPlace(ByteBuffer, java.util.concurrent.Executor)} sends from the caller's memory (the tcp
     * provider). False where it copies as {@code send} does (verbs): its future then only completes later, when the
     * send has completed, so a caller that would hold its buffer until then gains nothing by it and should {@code send}.
     */
    default boolean sendsInPlace() {
        return false;
    }

    /** Sends a message; see {@link #send(ByteBuffer)}. */
    default CompletableFuture<Void> send(byte[] message) {
        return send(ByteBuffer.wrap(message));
    }

    /**
     * The next message from the peer, in the order sent. Fails with the cause once the connection closes. The buffer
     * is one object for every consumer of the future (its {@code get}, each dependent stage), on whichever threads they
     * run: where more than one reads it, each takes a {@code duplicate()} first, since relative reads move its position.
     */
    CompletableFuture<ByteBuffer> receive();

    /**
     * {@link #receive()} whose future is completed by a task run on {@code executor}, for an application with event
     * loops of its own (a Netty channel's): a message that arrives while the future waits goes from the provider's
     * thread straight to {@code executor}, one hand-off instead of two. The provider's thread submits the task, so
     * {@code executor.execute} must return at once (an event loop's queue, never a bounded pool); should it reject
     * the task, the transport's completion threads complete the future. A message already queued completes it at once.
     */
    default CompletableFuture<ByteBuffer> receive(java.util.concurrent.Executor executor) {
        CompletableFuture<ByteBuffer> next = receive();
        if (next.isDone()) {
            return next;
        }
        CompletableFuture<ByteBuffer> result = new CompletableFuture<>();
        next.whenComplete((message, failure) -> {
            Runnable complete = () -> {
                if (failure == null) {
                    result.complete(message);
                } else {
                    result.completeExceptionally(failure);
                }
            };
            try {
                executor.execute(complete);
            } catch (java.util.concurrent.RejectedExecutionException e) {
                complete.run();
            }
        });
        return result;
    }

    /**
     * From the next message on, reads received messages into buffers {@code buffers} lends (see
     * {@link ReceiveBuffers}: who owns which buffer when), saving the copy out of rdma4j's heap buffer. Call it once,
     * before receiving; a provider that cannot read into the application's memory, or a connection implementation
     * without the notion, leaves messages in rdma4j's own buffers.
     */
    default void useReceiveBuffers(ReceiveBuffers buffers) {
    }

    /**
     * Sends a request of message {@code type} ({@link RequestTypes}) to the handler the peer's listener installed
     * for it ({@link RdmaTransport#listen(InetSocketAddress, RequestHandlers)}), and completes with the reply body.
     * Many requests may be in flight; replies are matched to requests whatever their order. {@code body} (at most
     * {@link TransportConfig#maxMessageSize()} bytes, else {@link IllegalArgumentException}) is copied before return.
     *
     * <p>A request is an operation: it holds one of the connection's operation slots until its reply arrives,
     * and a peer that does not reply within the operation timeout is treated as dead, as for any operation: the
     * request fails with {@link RdmaTimeoutException} and the connection closes. Fails with
     * {@link RemoteRequestException} when the peer answered with an error (unknown type, refused, handler failed,
     * reply too large, busy), {@link ConnectionClosedException} when the connection closed first.
     *
     * <p>The reply buffer is read-only and one object for every consumer of the future, as {@link #receive()}'s is:
     * parse it once, or {@code duplicate()} it in each consumer.
     */
    CompletableFuture<ByteBuffer> request(int type, ByteBuffer body);

    /** Sends a request; see {@link #request(int, ByteBuffer)}. */
    default CompletableFuture<ByteBuffer> request(int type, byte[] body) {
        return request(type, ByteBuffer.wrap(body));
    }

    /**
     * {@link #request} that returns the reply, for callers that have nothing else to do meanwhile. Throws what
     * the request's future fails with; an interrupt ends the wait with an {@link RdmaException} (the flag stays
     * set) and leaves the request to finish on its own.
     */
    default ByteBuffer requestAndWait(int type, ByteBuffer body) {
        CompletableFuture<ByteBuffer> reply = request(type, body);
        try {
            return reply.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RdmaException("interrupted while waiting for the reply to a request of type 0x"
                    + Integer.toHexString(type) + " on " + this, e);
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable cause = e.getCause();
            while (cause instanceof java.util.concurrent.CompletionException && cause.getCause() != null) {
                cause = cause.getCause();
            }
            throw cause instanceof RuntimeException r ? r : new RdmaException(String.valueOf(cause), cause);
        }
    }

    InetSocketAddress remoteAddress();

    InetSocketAddress localAddress();

    /** The provider this connection runs on. */
    String provider();

    boolean isOpen();

    /** Operations this connection has started and not yet finished. */
    int outstandingOperations();

    /** Closes the connection: pending operations fail with {@link ConnectionClosedException}. Idempotent. */
    @Override
    void close();
}
