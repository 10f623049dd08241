package io.rdma4j.netty;

import io.netty.channel.IoEvent;
import io.rdma4j.core.RdmaConnection;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.function.Consumer;

/**
 * A channel's received messages, on its event loop. One {@code receive()} is outstanding while no message waits here,
 * so the loop learns of the next one; the others stay in rdma4j, counted against its per-connection and per-transport
 * bounds, until a read loop takes them (a receive that completes at once costs no hand-off between threads). So a
 * channel holds at most one message beyond rdma4j's bounds, and one that does not read stops rdma4j from reading its
 * peer.
 */
final class Inbox {

    private static final int PREFETCH = 1;

    private final Consumer<IoEvent> post;
    /** Completes receives on the channel's loop, straight from rdma4j's thread that has the message. */
    private final Executor loop;
    private final ReceiveMemory memory;
    private final ArrayDeque<ReceivedMessage> messages = new ArrayDeque<>();
    private boolean receiving;
    /** The peer's end of stream arrived (queued, or handed to the pipeline). */
    private boolean endReceived;
    /** The connection ended after the peer's end of stream: an orderly close. */
    private boolean peerClosed;
    /** The connection ended without the peer's end of stream; delivered after the queued messages. */
    private Throwable failure;
    private boolean dropping;

    Inbox(Consumer<IoEvent> post, ReceiveMemory memory) {
        this.post = post;
        this.memory = memory;
        this.loop = task -> post.accept(new RdmaEvent.Run(task));
    }

    /** Keeps a receive outstanding while there is room here. */
    void pump(RdmaConnection connection) {
        while (connection != null && !receiving && !peerClosed && failure == null && messages.size() < PREFETCH) {
            CompletableFuture<ByteBuffer> next = connection.receive(loop);
            if (next.isDone()) {
                add(connection, next.isCompletedExceptionally() ? null : memory.received(next.resultNow()),
                        next.isCompletedExceptionally() ? next.exceptionNow() : null);
                continue;
            }
            receiving = true;
            next.whenComplete((m, e) -> post.accept(new RdmaEvent.Received(m == null ? null : memory.received(m), e)));
        }
    }

    /** The outstanding receive completed. */
    void completed(RdmaConnection connection, ReceivedMessage message, Throwable failure) {
        receiving = false;
        add(connection, message, failure);
    }

    private void add(RdmaConnection connection, ReceivedMessage message, Throwable failed) {
        if (failed != null) {
            if (endReceived) {
                peerClosed = true;
            } else {
                failure = failed;
            }
        } else if (endReceived) {
            // nothing may follow the end of a stream: a peer that breaks the protocol loses the connection
            message.release();
            connection.close();
            peerClosed = true;
        } else {
            endReceived |= SendWindow.isEnd(message.bytes());
            if (dropping) {
                message.release();
            } else {
                messages.add(message);
            }
        }
    }

    /**
     * The oldest message not yet read through (an empty one is the end of stream), or null when none has arrived;
     * the reader moves its position and calls {@link #consumed()} when it has taken all of it.
     */
    ReceivedMessage head(RdmaConnection connection) {
        ReceivedMessage m = messages.peek();
        if (m == null) {
            pump(connection);
            m = messages.peek();
        }
        return m;
    }

    /** The head message is read through: its lent memory goes back (the pipeline holds slices of their own). */
    void consumed() {
        messages.remove().release();
    }

    boolean endReceived() {
        return endReceived && !dropping;
    }

    /** Why the connection ended without an end of stream, once every message before it was taken. */
    Throwable failure() {
        return messages.isEmpty() ? failure : null;
    }

    /** Whether a message or the connection's end waits here, after taking what rdma4j already holds. */
    boolean available(RdmaConnection connection) {
        if (messages.isEmpty() && failure == null) {
            pump(connection);
        }
        return !messages.isEmpty() || failure != null;
    }

    boolean peerClosed() {
        return peerClosed;
    }

    /** Input shut down or channel closed: what arrives from now on is dropped. */
    void dropMessages() {
        dropping = true;
        ReceivedMessage m;
        while ((m = messages.poll()) != null) {
            m.release();
        }
    }

    /**
     * The channel closed (its connection closes now, or once its sends drained): gives back the memory of what
     * arrives until then, receiving until the connection's receive fails.
     */
    void drainUntilClosed(RdmaConnection connection) {
        CompletableFuture<ByteBuffer> next;
        while ((next = connection.receive()).isDone()) {
            if (next.isCompletedExceptionally()) {
                return;
            }
            memory.received(next.resultNow()).release();
        }
        next.whenComplete((m, e) -> {
            if (m != null) {
                memory.received(m).release();
                drainUntilClosed(connection);
            }
        });
    }
}
