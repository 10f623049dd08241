package io.rdma4j.netty;

import io.netty.buffer.ByteBuf;
import io.rdma4j.core.RdmaConnection;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The sends a channel handed to rdma4j and that have not completed: what a socket's send buffer is to a TCP channel.
 * The loop hands over messages while the window has room ({@code SO_SNDBUF} bytes, and fewer sends than rdma4j's
 * max-outstanding-operations, so a send never waits for a slot on the loop); the rest waits in Netty's outbound
 * buffer, which is what writability follows. Completions run on the loop: they count down here and post
 * {@link RdmaEvent.Writable} only when the loop waits for room, or a failure when a send failed.
 */
final class SendWindow {

    private static final ByteBuffer FIN = ByteBuffer.allocate(0);

    private final long maxBytes;
    private final int maxSends;
    private final Consumer<RdmaEvent> post;
    private final AtomicLong bytes = new AtomicLong();
    private final AtomicInteger sends = new AtomicInteger();
    private final AtomicBoolean blocked = new AtomicBoolean();
    private volatile RdmaConnection closeWhenDrained;
    /**
     * Completes sends on the channel's loop: a send the loop writes at once completes there without waking another
     * thread, and one completed later by rdma4j's thread goes to the loop in one hand-off.
     */
    private final Executor loop;

    SendWindow(long maxBytes, int maxOutstandingOperations, Consumer<RdmaEvent> post) {
        this.maxBytes = maxBytes;
        this.loop = task -> post.accept(new RdmaEvent.Run(task));
        // one slot stays free for the end-of-stream message
        this.maxSends = Math.max(1, Math.min(64, maxOutstandingOperations - 1));
        this.post = post;
    }

    boolean hasRoom() {
        return bytes.get() < maxBytes && sends.get() < maxSends;
    }

    /**
     * The loop found no room: a completion will post {@link RdmaEvent.Writable}. True when room appeared meanwhile,
     * and the loop goes on writing itself.
     */
    boolean block() {
        blocked.set(true);
        if (hasRoom() && blocked.compareAndSet(true, false)) {
            return true;
        }
        return false;
    }

    /** Sends {@code message} (copied before return) and counts it until it completes. */
    CompletableFuture<Void> send(RdmaConnection connection, ByteBuffer message) {
        int n = message.remaining();
        bytes.addAndGet(n);
        sends.incrementAndGet();
        CompletableFuture<Void> sent = connection.send(message, loop);
        sent.whenComplete((v, failure) -> completed(n, failure));
        return sent;
    }

    /**
     * Sends {@code message}, a view of {@code held}'s bytes, without a copy: {@code held} is retained until rdma4j is
     * done with it, whatever becomes of the channel's outbound buffer meanwhile. The completion runs on the thread
     * that finished the send (the loop's own when the socket took it at once), not as a task on the loop, so a closed
     * channel's discarded tasks cannot keep the buffer. The future returned completes after {@code held} went back:
     * the write's promise completes after it, as a socket channel's does. With {@code more}, rdma4j may hold the
     * message back to write it with the next ones; see
     * {@link RdmaConnection#sendInPlace(ByteBuffer, java.util.concurrent.Executor, boolean)}.
     */
    CompletableFuture<Void> sendInPlace(RdmaConnection connection, ByteBuffer message, ByteBuf held, boolean more) {
        int n = message.remaining();
        bytes.addAndGet(n);
        sends.incrementAndGet();
        held.retain();
        return connection.sendInPlace(message, Runnable::run, more).whenComplete((v, failure) -> {
            held.release();
            completed(n, failure);
        });
    }

    /** The end of this side's stream: an empty message, after everything sent before it. */
    void sendEnd(RdmaConnection connection) {
        send(connection, FIN.duplicate());
    }

    private void completed(int n, Throwable failure) {
        bytes.addAndGet(-n);
        int left = sends.decrementAndGet();
        if (failure != null) {
            post.accept(new RdmaEvent.SendFailed(failure));
        } else if (blocked.get() && hasRoom() && blocked.compareAndSet(true, false)) {
            post.accept(new RdmaEvent.Writable());
        }
        RdmaConnection c = closeWhenDrained;
        if (left == 0 && c != null) {
            c.close();
        }
    }

    /** Closes {@code connection} once every send handed over has completed (rdma4j's operation timeout bounds that). */
    void closeWhenDrained(RdmaConnection connection) {
        closeWhenDrained = connection;
        if (sends.get() == 0) {
            connection.close();
        }
    }

    /**
     * Closes {@code connection} as {@code SO_LINGER} says: 0 closes it at once, so the peer sees a reset and no end of
     * stream; otherwise the stream ends (unless the output was shut down already) and the connection closes once the
     * sends drain, or after {@code lingerSeconds} on {@code loop} when that is positive ({@code loop} is asked only
     * then: a channel closed before its registration has none).
     */
    void close(RdmaConnection connection, int lingerSeconds, boolean outputShutdown, Supplier<ScheduledExecutorService> loop) {
        if (lingerSeconds == 0) {
            connection.close();
            return;
        }
        if (!outputShutdown) {
            sendEnd(connection);
        }
        closeWhenDrained(connection);
        if (lingerSeconds > 0) {
            try {
                loop.get().schedule(connection::close, lingerSeconds, TimeUnit.SECONDS);
            } catch (RuntimeException e) {
                connection.close();
            }
        }
    }

    static boolean isEnd(ByteBuffer message) {
        return !message.hasRemaining();
    }
}
