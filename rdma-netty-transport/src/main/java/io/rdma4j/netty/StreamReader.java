package io.rdma4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;

import java.nio.ByteBuffer;

/**
 * A channel's reads, on its event loop, as a socket channel's: read loops only when asked (or auto-read), into
 * buffers of the channel's allocator sized by its {@code RecvByteBufAllocator} (a message may span several; one rdma4j
 * read into the channel's memory is handed on as slices of that size, without a copy), and the
 * peer's end of stream read through without a pending read, as epoll does after {@code EPOLLRDHUP}, ending the
 * input with both half-close events (or a close without half-closure). A connection that ends without the peer's end
 * of stream fails the read with a reset.
 */
final class StreamReader {

    private final RdmaSocketChannel channel;
    private final Inbox inbox;
    private boolean readRequested;
    private boolean reading;
    private boolean readScheduled;
    private boolean inputClosedSeenErrorOnRead;
    /**
     * The channel is closing: nothing more reaches the pipeline, and what arrives is received and released, so that
     * rdma4j's bounds never stop the peer (which may itself wait to send before it reads what the close waits for).
     */
    private boolean stopped;

    StreamReader(RdmaSocketChannel channel, Inbox inbox) {
        this.channel = channel;
        this.inbox = inbox;
    }

    /** The pipeline asks for a read. */
    void beginRead() {
        readRequested = true;
        if (!reading && !readScheduled && readable()) {
            readScheduled = true;
            channel.post(new RdmaEvent.ReadNow());
        }
        inbox.pump(channel.connection());
    }

    void autoReadCleared() {
        readRequested = false;
    }

    void stop() {
        stopped = true;
        inbox.dropMessages();
        inbox.pump(channel.connection());
    }

    void readNow() {
        readScheduled = false;
        readLoop();
    }

    private boolean readable() {
        return inbox.available(channel.connection()) || (channel.inputShutdown() && !inputClosedSeenErrorOnRead);
    }

    void received(ReceivedMessage message, Throwable failure) {
        inbox.completed(channel.connection(), message, failure);
        if (inbox.peerClosed() && inputClosedSeenErrorOnRead) {
            // the peer ended its stream, we read past the end, and now its connection is gone too
            channel.closeNow();
            return;
        }
        readLoop();
    }

    private void readLoop() {
        if (stopped) {
            if (channel.isActive()) {
                inbox.pump(channel.connection());
            }
            return;
        }
        if (reading) {
            return; // the loop further up the stack sees what changed
        }
        reading = true;
        try {
            // once the peer's end of stream has arrived, what precedes it is read whether or not a read was asked for
            while ((readRequested || inbox.endReceived()) && channel.isActive() && readable()) {
                if (channel.inputShutdown() && (inputClosedSeenErrorOnRead || !channel.config().isAllowHalfClosure())) {
                    readRequested = false;
                    break;
                }
                readOnce();
            }
        } finally {
            reading = false;
        }
        if (channel.isActive()) {
            inbox.pump(channel.connection());
        }
    }

    private void readOnce() {
        var handle = channel.unsafe().recvBufAllocHandle();
        handle.reset(channel.config());
        var pipeline = channel.pipeline();
        if (channel.inputShutdown()) {
            // input shut down locally: a read past the end, as a socket reads end of stream again
            readRequested = false;
            handle.readComplete();
            pipeline.fireChannelReadComplete();
            shutdownInput(true);
            return;
        }
        boolean end = false;
        Throwable failure = null;
        do {
            ReceivedMessage received = inbox.head(channel.connection());
            if (received == null) {
                failure = inbox.failure();
                break;
            }
            readRequested = false;
            if (SendWindow.isEnd(received.bytes())) {
                inbox.consumed();
                end = true;
                break;
            }
            ByteBuf buf;
            int n;
            if (received.lent() != null) {
                // read into the channel's memory already: a slice as large as the allocator would have read
                ByteBuf lent = received.lent();
                handle.attemptedBytesRead(handle.guess());
                n = Math.min(handle.guess(), lent.readableBytes());
                buf = lent.readRetainedSlice(n);
                if (!lent.isReadable()) {
                    inbox.consumed();
                }
            } else {
                ByteBuffer m = received.bytes();
                buf = handle.allocate(channel.config().getAllocator());
                n = Math.min(buf.writableBytes(), m.remaining());
                handle.attemptedBytesRead(buf.writableBytes());
                buf.writeBytes(m.slice(m.position(), n));
                m.position(m.position() + n);
                if (!m.hasRemaining()) {
                    inbox.consumed();
                }
            }
            handle.lastBytesRead(n);
            handle.incMessagesRead(1);
            pipeline.fireChannelRead(buf);
        } while (handle.continueReading() && channel.isActive());
        handle.readComplete();
        pipeline.fireChannelReadComplete();
        if (end) {
            shutdownInput(true);
        } else if (failure != null && channel.isActive()) {
            readRequested = false;
            pipeline.fireExceptionCaught(RdmaErrors.reset(failure));
            channel.closeNow();
        }
    }

    /** The input ended: as epoll's channel, the end and (all data read) the read-complete event, or a close. */
    private void shutdownInput(boolean allDataRead) {
        if (!channel.inputShutdown()) {
            if (!channel.config().isAllowHalfClosure()) {
                channel.closeNow();
                return;
            }
            channel.markInputShutdown();
            channel.pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
        }
        if (allDataRead && !inputClosedSeenErrorOnRead && channel.isActive()) {
            inputClosedSeenErrorOnRead = true;
            channel.pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
        }
        if (inputClosedSeenErrorOnRead && inbox.peerClosed() && channel.isActive()) {
            channel.closeNow();
        }
    }
}
