package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.spi.ConnectionEvents;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

/**
 * When a connection's reader stops reading its socket: while the peer has reached a bound of its own (unsent
 * responses, their bytes, unreceived messages, unanswered requests) or its share of the transport's budget
 * (tcp.max-buffered-bytes). The socket is then not read, so TCP's flow control holds the peer back and this side's
 * memory stays bounded whatever the peer sends, per connection and per transport.
 */
final class ReadBounds {

    private static final long MIN_PAUSE_POLL_MILLIS = 5;
    private static final long MAX_PAUSE_POLL_MILLIS = 100;

    private final TcpTransport transport;
    private final TcpOptions options;
    private final OutgoingFrames outgoing;
    private final FrameChannel frames;
    private final FrameInput input;
    private final InetSocketAddress remoteAddress;
    private final BooleanSupplier open;
    private final Object readGate = new Object();
    private volatile ConnectionEvents events;
    private volatile boolean paused;

    ReadBounds(TcpTransport transport, OutgoingFrames outgoing, FrameChannel frames, FrameInput input,
               InetSocketAddress remoteAddress, BooleanSupplier open) {
        this.transport = transport;
        this.options = transport.options();
        this.outgoing = outgoing;
        this.frames = frames;
        this.input = input;
        this.remoteAddress = remoteAddress;
        this.open = open;
    }

    void start(ConnectionEvents events) {
        this.events = events;
    }

    /** Whether the reader is held back by a bound: then the peer's silence is this side's doing. */
    boolean paused() {
        return paused;
    }

    /**
     * Blocks the reader while a bound is reached, or while a message of {@code incoming} bytes would take the
     * connection past its share of the transport's budget.
     */
    void awaitCapacity(long incoming) throws IOException {
        if (!atBound(incoming)) {
            return;
        }
        outgoing.flush(); // responses the reader held back for a burst count towards the bound
        paused = true;
        try {
            // roomMade() wakes the reader when a response is written or a message received; the poll, less often
            // the longer the pause lasts, is for room made elsewhere (the transport's budget, other connections).
            long pollMillis = MIN_PAUSE_POLL_MILLIS;
            while (open.getAsBoolean() && atBound(incoming)) {
                if (outgoing.needsWriterThread()) {
                    synchronized (readGate) {
                        if (atBound(incoming)) {
                            readGate.wait(pollMillis);
                        }
                    }
                } else {
                    // no writer thread: write the responses here while waiting
                    frames.awaitWritable(pollMillis);
                }
                pollMillis = Math.min(MAX_PAUSE_POLL_MILLIS, pollMillis * 2);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ConnectionClosedException("reader of the connection to " + remoteAddress + " was interrupted");
        } finally {
            // the pause was this side's choice, not the peer's silence
            input.markRead();
            paused = false;
        }
    }

    /**
     * Waits until a message of {@code cost} bytes fits, then counts it towards the transport's budget while it is
     * read and handed over: every other reader sees it before it decides on its own, so a thousand readers cannot
     * all find the same room. {@link #messageHandedOver} takes the count back once the inbox holds the message.
     */
    void admitMessage(long cost) throws IOException {
        AtomicLong admitted = transport.admittedMessageBytes();
        while (true) {
            awaitCapacity(cost);
            admitted.addAndGet(cost);
            ConnectionEvents e = events;
            if (!beyondShare(e, outgoing.unsentResponseBytes() + e.unreceivedMessageBytes() + cost, 0)) {
                return;
            }
            admitted.addAndGet(-cost);
        }
    }

    /**
     * As {@link #admitMessage} without waiting: false, having counted nothing, where it would wait (the caller then
     * leaves the message to a reader thread, which may).
     */
    boolean tryAdmitMessage(long cost) {
        if (atBound(cost)) {
            return false;
        }
        AtomicLong admitted = transport.admittedMessageBytes();
        admitted.addAndGet(cost);
        ConnectionEvents e = events;
        if (beyondShare(e, outgoing.unsentResponseBytes() + e.unreceivedMessageBytes() + cost, 0)) {
            admitted.addAndGet(-cost);
            return false;
        }
        return true;
    }

    void messageHandedOver(long cost) {
        transport.admittedMessageBytes().addAndGet(-cost);
    }

    /**
     * A response was written or dropped, or the application took a message: a reader waiting at a bound may go on
     * without waiting for its next poll.
     */
    void roomMade() {
        if (paused && !atBound(0)) { // at a bound still, the reader would only go back to waiting
            if (outgoing.needsWriterThread()) {
                synchronized (readGate) {
                    readGate.notifyAll();
                }
            } else {
                frames.wakeUp();
            }
        }
    }

    /** Whether a bound is reached, or a message of {@code incoming} bytes would pass the connection's share. */
    boolean atBound(long incoming) {
        ConnectionEvents e = events;
        long unsent = outgoing.unsentResponseBytes();
        long unreceived = e.unreceivedMessageBytes();
        return outgoing.unsentResponses() >= options.maxUnsentResponses()
                || unsent >= options.maxUnsentResponseBytes()
                || unreceived >= options.maxInboxBytes()
                || e.unansweredRequests() >= options.maxUnsentResponses()
                || beyondShare(e, unsent + unreceived + incoming, incoming);
    }

    /**
     * The transport's budget, split in two halves. Every connection has an equal share of the first: holdings
     * ({@code holds}, {@code incoming} included) within it are always let in, so a peer that holds little is read
     * whoever floods. Beyond its share a connection may take from the second half only while what all connections
     * hold, with {@code incoming} more, stays within one half. The shares then hold at most one half and the rest at
     * most the other, so the total stays within the budget however many peers there are, and a peer whose messages
     * the application does not receive slows only itself.
     */
    private boolean beyondShare(ConnectionEvents e, long holds, long incoming) {
        if (holds == 0) {
            return false;
        }
        long half = options.maxBufferedBytes() / 2;
        if (holds <= half / Math.max(1, transport.connectionCount())) {
            return false;
        }
        long total = e.transportUnreceivedMessageBytes() + transport.unsentResponseBytes().get()
                + transport.admittedMessageBytes().get();
        return total + incoming > half;
    }
}
