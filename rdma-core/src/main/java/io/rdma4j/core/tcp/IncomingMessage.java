package io.rdma4j.core.tcp;

import io.rdma4j.core.spi.ConnectionEvents;

import java.nio.ByteBuffer;
import java.util.function.Supplier;

/**
 * The message a connection's leader is reading: its bytes counted against the read bounds from admission until it is
 * handed over. A message the poller's thread began and could not finish without waiting stays here for whichever
 * thread leads next. Leader only.
 */
final class IncomingMessage {

    private final ReadBounds bounds;
    private final OutgoingFrames outgoing;
    private final Supplier<ConnectionEvents> events;
    private ByteBuffer message;
    private long cost;

    IncomingMessage(ReadBounds bounds, OutgoingFrames outgoing, Supplier<ConnectionEvents> events) {
        this.bounds = bounds;
        this.outgoing = outgoing;
        this.events = events;
    }

    /** What a message of this header counts against the bounds. */
    static long cost(TcpFrameCodec.Header h) {
        return Math.max(h.length(), ConnectionEvents.MESSAGE_OVERHEAD);
    }

    /** Once {@code cost} is admitted: the buffer the message's bytes are read into (the application's, if lent). */
    ByteBuffer begin(TcpFrameCodec.Header h, long cost) {
        try {
            this.message = events.get().messageBuffer(h.length());
        } catch (RuntimeException e) {
            bounds.messageHandedOver(cost); // the lender broke its contract: the connection fails with this
            throw e;
        }
        this.cost = cost;
        return message;
    }

    /** The message begun and not handed over yet; null if none. */
    ByteBuffer partial() {
        return message;
    }

    /** All of the message's bytes are read: hands it over. */
    void deliver() {
        ByteBuffer m = message;
        message = null;
        try {
            outgoing.flush(); // the message's handler may block, or take reading over
            events.get().onMessage(m.flip());
        } finally {
            bounds.messageHandedOver(cost);
        }
    }

    /** The connection ended with the message unfinished: its bytes no longer count. */
    void abandon() {
        if (message != null) {
            ByteBuffer m = message;
            message = null;
            bounds.messageHandedOver(cost);
            events.get().messageDropped(m);
        }
    }
}
