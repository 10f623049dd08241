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
    private final ArrayDeque<ByteBuffer> messages = new ArrayDeque<>();
    private boolean receiving;
    /** The peer's end of stream arrived (queued, or handed to the pipeline). */
    private boolean endReceived;
    /** The connection ended after the peer's end of stream: an orderly close. */
    private boolean peerClosed;
    /** The connection ended without the peer's end of stream; delivered after the queued messages. */
    private Throwable failure;
    private boolean dropping;

    Inbox(Consumer<IoEvent> post) {
        this.post = post;
        this.loop = task -> post.accept(new RdmaEvent.Run(task));
    }

    /** Keeps a receive outstanding while there is room here. */
    void pump(RdmaConnection connection) {
        while (connection != null && !receiving && !peerClosed && failure == null && messages.size() < PREFETCH) {
            CompletableFuture<ByteBuffer> next = connection.receive(loop);
            if (next.isDone()) {
                add(connection, next.isCompletedExceptionally() ? null : next.resultNow(),
                        next.isCompletedExceptionally() ? next.exceptionNow() : null);
                continue;
            }
            receiving = true;
            next.whenComplete((m, e) -> post.accept(new RdmaEvent.Received(m, e)));
        }
    }

    /** The outstanding receive completed. */
    void completed(RdmaConnection connection, ByteBuffer message, Throwable failure) {
        receiving = false;
        add(connection, message, failure);
    }

    private void add(RdmaConnection connection, ByteBuffer message, Throwable failed) {
        if (failed != null) {
            if (endReceived) {
                peerClosed = true;
            } else {
                failure = failed;
            }
        } else if (endReceived) {
            // nothing may follow the end of a stream: a peer that breaks the protocol loses the connection
            connection.close();
            peerClosed = true;
        } else if (SendWindow.isEnd(message)) {
            endReceived = true;
            if (!dropping) {
                messages.add(message);
            }
        } else if (!dropping) {
            messages.add(message);
        }
    }

    /**
     * The oldest message not yet read through (an empty one is the end of stream), or null when none has arrived;
     * the reader moves its position and calls {@link #consumed()} when it has taken all of it.
     */
    ByteBuffer head(RdmaConnection connection) {
        ByteBuffer m = messages.peek();
        if (m == null) {
            pump(connection);
            m = messages.peek();
        }
        return m;
    }

    void consumed() {
        messages.poll();
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
        messages.clear();
    }
}
