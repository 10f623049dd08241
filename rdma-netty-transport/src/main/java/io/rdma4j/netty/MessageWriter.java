package io.rdma4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;
import io.rdma4j.core.RdmaConnection;

import java.io.EOFException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Turns a channel's flushed writes into rdma4j messages while its send window has room: a buffer goes as it is
 * ({@code sendInPlace}, the messages of one flush written together) where the provider sends in place, else as the
 * copy {@code send} makes; one larger than a message as several; small buffers flushed together as one (copied into
 * the loop's gather buffer, which {@code send} copies again before it returns); a file region as copies of its bytes.
 * <p>
 * A write's promise completes once rdma4j no longer reads its bytes, as a socket channel's does once the kernel has
 * copied them: at once for what was copied, when the send completes for a buffer sent in place, whose bytes the NIC
 * or the provider still reads until then. So bytes handed over in place stay in Netty's outbound buffer (which
 * completes promises as it removes bytes) until their send completes, and the next write starts after them.
 * Outbound bytes are removed in order, so what was copied behind a send in place waits for it too.
 * Loop thread only, except where said.
 */
final class MessageWriter {

    /** At most this many buffers copied into one message, as a gathering write takes at most {@code IOV_MAX}. */
    private static final int MAX_GATHERED = 1024;
    /** Flushed messages already handed over that a write steps past before it waits for sends to complete. */
    private static final int MAX_HANDED_OVER_MESSAGES = 4096;
    /** How long a close waits for the sends in place to complete. */
    private static final long MAX_CLOSE_WAIT_SECONDS = 10;

    private final RdmaSocketChannel channel;
    private final RdmaConnection connection;
    private final SendWindow window;
    private final int maxMessageSize;
    /**
     * Whether the provider sends a buffer from its own memory. Where it copies anyway (verbs), a buffer sent in place
     * would only keep its write in the outbound buffer until the peer acknowledged it, so that with small water marks
     * a stream would wait a round trip per write: then a buffer is sent as a copy and its write completes at once.
     */
    private final boolean inPlace;
    /** What was handed over and is still in the outbound buffer, oldest first. */
    private final ArrayDeque<HandedOver> handedOver = new ArrayDeque<>();
    /** The bytes of {@link #handedOver}'s buffers, and how many of its file regions are fully handed over. */
    private long handedOverBytes;
    private int handedOverRegions;
    /** The loop's thread while it is in {@link #write}. */
    private Thread writer;
    /** Sends in place not completed yet; counted down from any thread. */
    private final AtomicInteger inPlaceSending = new AtomicInteger();
    /** Set from any thread: the last send in place completed off the loop and the loop is told once. */
    private final AtomicBoolean removalPosted = new AtomicBoolean();
    private final Frontier frontier = new Frontier();
    /** The channel's outbound buffer, as the last write saw it: a close detaches it from the channel first. */
    private ChannelOutboundBuffer outbound;
    /** Netty's close, held until the sends in place complete, and the timer that ends the wait; loop thread only. */
    private Runnable closeAfterSends;
    private java.util.concurrent.ScheduledFuture<?> closeWaitTimer;

    MessageWriter(RdmaSocketChannel channel, RdmaConnection connection, SendWindow window, int maxMessageSize) {
        this.channel = channel;
        this.connection = connection;
        this.window = window;
        this.maxMessageSize = maxMessageSize;
        this.inPlace = connection.sendsInPlace();
    }

    /** Removes what rdma4j is done with from {@code in}, then hands over what follows while the window has room. */
    void write(ChannelOutboundBuffer in, RdmaIoHandler loop) throws Exception {
        writer = Thread.currentThread();
        outbound = in;
        try {
            removeDone(in);
            do {
                try {
                    handOver(in, loop);
                } finally {
                    connection.flushSends(); // what went in place was held back to go out in as few system calls as it can
                }
                // Removing completes promises and may make the channel writable again: what the pipeline writes and
                // flushes then (its flush finds this flush under way) is handed over on the next turn.
            } while (removeDone(in));
        } catch (Exception | Error e) {
            // the channel fails every flushed write with this: nothing handed over is left to remove
            forgetHandedOver();
            throw e;
        } finally {
            writer = null;
            if (closeAfterSends != null && inPlaceSending.get() == 0) {
                // a listener closed the channel in this write, and the last send completed in it too: nobody posted
                channel.post(new RdmaEvent.Run(this::releaseHeldClose));
            }
        }
    }

    /**
     * Hands over messages while the window has room, and while fewer than {@link #MAX_HANDED_OVER_MESSAGES} wait
     * for sends in place to complete.
     */
    private void handOver(ChannelOutboundBuffer in, RdmaIoHandler loop) throws Exception {
        while (true) {
            if (closedMeanwhile(in) || closeAfterSends != null) {
                return; // nothing is handed over once Netty's close began
            }
            if (!window.hasRoom() && !window.block()) {
                return; // a completion posts Writable, which flushes again
            }
            frontier.find(in);
            List<Object> next = frontier.messages;
            if (frontier.tooFar || next.isEmpty()) {
                return; // tooFar: a send in place heads what waits, and its completion flushes again
            }
            if (next.getFirst() instanceof FileRegion region) {
                writeRegion(in, loop, region);
            } else {
                writeBuffers(loop, next, frontier.offset);
            }
            removeDone(in);
        }
    }

    private void writeBuffers(RdmaIoHandler loop, List<Object> next, int offset) throws Exception {
        ByteBuf first = (ByteBuf) next.getFirst();
        int length = first.readableBytes() - offset;
        boolean alone = next.size() == 1 || !(next.get(1) instanceof ByteBuf second)
                || (long) length + second.readableBytes() > maxMessageSize;
        if (first.nioBufferCount() == 1 && (alone || length >= maxMessageSize)) {
            int n = Math.min(length, maxMessageSize);
            ByteBuffer message = first.nioBuffer(first.readerIndex() + offset, n);
            if (inPlace) {
                CompletableFuture<Void> sent = window.sendInPlace(connection, message, first, true);
                check(sent);
                handedOver(n, sent);
            } else {
                check(window.send(connection, message));
                handedOver(n, null);
            }
            return;
        }
        ByteBuffer message = loop.gatherBuffer(maxMessageSize).limit(maxMessageSize);
        int n = Math.min(length, maxMessageSize);
        first.getBytes(first.readerIndex() + offset, message.limit(n));
        for (int i = 1; i < next.size() && i < MAX_GATHERED; i++) {
            if (!(next.get(i) instanceof ByteBuf buf) || buf.readableBytes() > maxMessageSize - n) {
                break;
            }
            buf.getBytes(buf.readerIndex(), message.limit(n + buf.readableBytes()));
            n += buf.readableBytes();
        }
        message.flip();
        check(window.send(connection, message));
        handedOver(n, null);
    }

    /** The next message's worth of a file region: rdma4j has no sendfile, so its bytes are copied into a message. */
    private void writeRegion(ChannelOutboundBuffer in, RdmaIoHandler loop, FileRegion region) throws Exception {
        if (region.transferred() < region.count()) {
            ByteBuffer message = loop.gatherBuffer(maxMessageSize).limit(maxMessageSize);
            long n = region.transferTo(new MessageFiller(message), region.transferred());
            message.flip();
            if (n <= 0 || !message.hasRemaining()) {
                throw new EOFException("file region " + region + " ended before its count: " + region.transferred()
                        + " of " + region.count() + " bytes");
            }
            check(window.send(connection, message));
            if (in.current() == region) { // progress goes to the head's promise: not a buffer still sent in place
                in.progress(n);
            }
        }
        if (region.transferred() >= region.count()) {
            handedOver.add(HandedOver.REGION);
            handedOverRegions++;
        }
    }

    private void handedOver(int bytes, CompletableFuture<Void> sent) {
        handedOver.add(new HandedOver(bytes, sent));
        handedOverBytes += bytes;
        if (sent != null) {
            inPlaceSending.incrementAndGet();
            sent.whenComplete((v, failure) -> sentInPlace());
        }
    }

    /**
     * For {@code prepareToClose}: null when no send in place is under way, else an executor that holds Netty's close
     * until they complete. Netty fails every write still in the outbound buffer once it closes, although the bytes of
     * those sent in place go out: held, their writes complete as they would have, and only what was never handed over
     * fails. A send that cannot complete fails once the connection does, which ends the wait too. Not held with
     * {@code SO_LINGER=0} (a reset), once the output was shut down (Netty failed the writes then) or while the loop
     * shuts down (its timers are cancelled).
     */
    Executor closeAfterSendsInPlace(int soLinger, boolean outputShutdown) {
        if (inPlaceSending.get() == 0 || outbound == null || soLinger == 0 || outputShutdown || !channel.isRegistered()
                || channel.eventLoop().isShuttingDown()) {
            return null;
        }
        return close -> {
            closeAfterSends = close;
            if (inPlaceSending.get() == 0) {
                closeHeld(); // the last one completed meanwhile, and its removal may have been posted before the close
            } else {
                // a peer that stops reading must not hold the channel open: then Netty fails what still sends
                try {
                    closeWaitTimer = channel.eventLoop().schedule(() -> {
                        if (closeAfterSends == close) {
                            closeHeld();
                        }
                    }, MAX_CLOSE_WAIT_SECONDS, TimeUnit.SECONDS);
                } catch (RuntimeException loopShuttingDown) {
                    closeHeld();
                }
            }
        };
    }

    /**
     * The loop: lets a held close go on now, whether or not the sends in place completed (the loop shuts down, and its
     * timers with it); what still sends keeps its buffer retained until rdma4j is done with it.
     */
    void releaseHeldClose() {
        if (closeAfterSends != null) {
            closeHeld();
        }
    }

    /** The loop, with a close held: completes the writes rdma4j is done with, then lets Netty close. */
    private void closeHeld() {
        Runnable close = closeAfterSends;
        if (closeWaitTimer != null) {
            closeWaitTimer.cancel(false);
            closeWaitTimer = null;
        }
        try {
            removeDone(outbound);
        } catch (Exception e) {
            // a failed send: Netty's close fails it with the rest
        } finally {
            closeAfterSends = null;
            close.run();
        }
    }

    /**
     * Any thread: a send in place completed. On the loop inside {@link #write} it is removed before it returns; else
     * the loop is told once the last one completed. Removing earlier would seldom make the channel writable (what
     * still sends counts against the water marks), and each time would cost the loop a wake-up: 1 MiB streamed
     * is 16 sends.
     */
    private void sentInPlace() {
        if (inPlaceSending.decrementAndGet() > 0 || writer == Thread.currentThread()) {
            return;
        }
        if (removalPosted.compareAndSet(false, true)) {
            channel.post(new RdmaEvent.Run(() -> {
                removalPosted.set(false);
                if (closeAfterSends != null && inPlaceSending.get() == 0) {
                    closeHeld();
                } else {
                    channel.flushNow();
                }
            }));
        }
    }

    /**
     * Removes from {@code in} what rdma4j is done with, oldest first, completing those writes' promises; a failed
     * send throws. True when something was removed.
     */
    private boolean removeDone(ChannelOutboundBuffer in) throws Exception {
        boolean removed = false;
        HandedOver head;
        while (!closedMeanwhile(in) && (head = handedOver.peek()) != null && head.done()) {
            check(head.sent);
            handedOver.remove();
            if (head == HandedOver.REGION) {
                in.removeBytes(0); // empty buffers before it
                if (!(in.current() instanceof FileRegion)) {
                    throw new IllegalStateException("the outbound buffer's head is not the file region handed over");
                }
                handedOverRegions--;
                in.remove();
            } else {
                handedOverBytes -= head.bytes;
                in.removeBytes(head.bytes);
            }
            removed = true;
        }
        if (handedOver.isEmpty() && !closedMeanwhile(in)) {
            in.removeBytes(0); // empty buffers at the head, which nothing hands over
        }
        return removed;
    }

    /**
     * Whether a listener of a completed write closed the channel or shut its output down: then Netty has failed
     * every flushed write, and nothing handed over is left to remove.
     */
    private boolean closedMeanwhile(ChannelOutboundBuffer in) {
        if (channel.unsafe().outboundBuffer() == in || closeAfterSends != null) {
            return false; // or detached by a close that waits for this removal
        }
        forgetHandedOver();
        return true;
    }

    private void forgetHandedOver() {
        handedOver.clear();
        handedOverBytes = 0;
        handedOverRegions = 0;
    }

    private static void check(CompletableFuture<Void> sent) throws Exception {
        if (sent != null && sent.isCompletedExceptionally()) {
            throw RdmaErrors.sendFailed(sent.exceptionNow());
        }
    }

    /** Bytes of the outbound buffer handed over; {@code sent} is the send in place they wait for, null if copied. */
    private record HandedOver(int bytes, CompletableFuture<Void> sent) {
        /** A file region all of whose bytes were copied into messages. */
        static final HandedOver REGION = new HandedOver(0, null);

        boolean done() {
            return sent == null || sent.isDone();
        }
    }

    /**
     * The flushed messages after what was handed over: the first (from {@code offset}, where a buffer was partly
     * handed over) and the buffers that follow it up to a message's worth.
     */
    private final class Frontier implements ChannelOutboundBuffer.MessageProcessor {
        final List<Object> messages = new ArrayList<>();
        int offset;
        boolean tooFar;
        private long skipBytes;
        private int skipRegions;
        private int stepped;
        private long collected;

        void find(ChannelOutboundBuffer in) throws Exception {
            messages.clear();
            offset = 0;
            tooFar = false;
            skipBytes = handedOverBytes;
            skipRegions = handedOverRegions;
            stepped = 0;
            collected = 0;
            in.forEachFlushedMessage(this);
        }

        @Override
        public boolean processMessage(Object msg) {
            if (messages.isEmpty()) {
                if (++stepped > MAX_HANDED_OVER_MESSAGES) {
                    tooFar = true;
                    return false;
                }
                if (msg instanceof ByteBuf buf) {
                    if (buf.readableBytes() <= skipBytes) {
                        skipBytes -= buf.readableBytes();
                        return true; // handed over, or empty
                    }
                    offset = (int) skipBytes;
                    skipBytes = 0;
                    collected = buf.readableBytes() - offset;
                } else if (msg instanceof FileRegion region && skipRegions > 0
                        && region.transferred() >= region.count()) {
                    skipRegions--;
                    return true;
                }
                messages.add(msg);
                return msg instanceof ByteBuf && collected < maxMessageSize;
            }
            if (msg instanceof ByteBuf buf) {
                if (!buf.isReadable()) {
                    return true; // an empty buffer goes with the bytes around it
                }
                collected += buf.readableBytes();
            }
            messages.add(msg);
            return msg instanceof ByteBuf && collected < maxMessageSize && messages.size() <= MAX_GATHERED;
        }
    }

    /** Takes what a file region transfers into one message buffer, until it is full. */
    private record MessageFiller(ByteBuffer message) implements WritableByteChannel {
        @Override
        public int write(ByteBuffer src) {
            int n = Math.min(src.remaining(), message.remaining());
            message.put(src.slice(src.position(), n));
            src.position(src.position() + n);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }
}
