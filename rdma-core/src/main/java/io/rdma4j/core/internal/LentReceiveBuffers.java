package io.rdma4j.core.internal;

import io.rdma4j.core.ReceiveBuffers;

import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * The receive memory an application lent one connection ({@link io.rdma4j.core.RdmaConnection#useReceiveBuffers}):
 * hands its buffers to the provider, tells them from rdma4j's own when a message arrives, and gives back those whose
 * message is not delivered. Lent buffers are direct (checked as each is handed out) and rdma4j's own are heap
 * buffers, so a message's buffer says whose it is.
 */
final class LentReceiveBuffers {

    private static final System.Logger LOG = System.getLogger(LentReceiveBuffers.class.getName());

    private final Object connection;
    private volatile ReceiveBuffers lender;
    private volatile boolean allocateFailureLogged;

    /** {@code connection}: named in log lines. */
    LentReceiveBuffers(Object connection) {
        this.connection = connection;
    }

    void lend(ReceiveBuffers buffers) {
        Objects.requireNonNull(buffers, "buffers");
        synchronized (this) {
            if (lender != null) {
                throw new IllegalStateException("receive buffers are lent to " + connection
                        + " already; call useReceiveBuffers once per connection");
            }
            lender = buffers;
        }
    }

    /** The buffer for a message of {@code size} bytes: the lender's, else (none, or it failed) a heap buffer. */
    ByteBuffer allocate(int size) {
        ReceiveBuffers l = lender;
        if (l == null || size < MessageHeader.SIZE) {
            return ByteBuffer.allocate(size); // one that short fails its header check: not worth the lender's memory
        }
        ByteBuffer b;
        try {
            b = l.allocate(size);
        } catch (RuntimeException e) {
            if (!allocateFailureLogged) {
                allocateFailureLogged = true;
                LOG.log(System.Logger.Level.WARNING, () -> "ReceiveBuffers.allocate(" + size + ") failed on " + connection
                        + "; its messages go to heap buffers while it fails: " + e, e);
            }
            return ByteBuffer.allocate(size);
        }
        if (b == null || !b.isDirect() || b.isReadOnly() || b.position() != 0 || b.remaining() < size) {
            if (b != null && b.isDirect()) {
                l.release(b);
            }
            throw new IllegalStateException("ReceiveBuffers.allocate(" + size + ") returned " + b + " to " + connection
                    + "; return a writable direct buffer at position 0 with at least " + size + " bytes remaining");
        }
        return b.limit(size);
    }

    boolean isLent(ByteBuffer message) {
        return lender != null && message.isDirect();
    }

    /** Gives {@code message} back to the lender if it is one of its buffers. */
    void release(ByteBuffer message) {
        if (isLent(message)) {
            lender.release(message);
        }
    }

    /** A message rdma4j keeps itself (a request or a reply): in its own heap buffer, the lent one given back. */
    ByteBuffer own(ByteBuffer message) {
        if (!isLent(message)) {
            return message;
        }
        ByteBuffer copy = ByteBuffer.allocate(message.remaining()).put(message.duplicate()).flip();
        release(message);
        return copy;
    }
}
