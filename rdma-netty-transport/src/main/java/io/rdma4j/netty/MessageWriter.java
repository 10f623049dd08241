package io.rdma4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;
import io.rdma4j.core.RdmaConnection;

import java.io.EOFException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.util.concurrent.CompletableFuture;

/**
 * Turns a channel's flushed writes into rdma4j messages while its send window has room: a buffer goes as it is
 * ({@code sendInPlace}, the buffer retained until rdma4j is done with it; the messages of one flush written together),
 * one larger than a message as several, small
 * buffers flushed together as one (copied into the loop's gather buffer, which {@code send} copies again before it
 * returns), a file region as copies of its bytes. Write promises complete as the bytes are
 * handed over, as a socket's do when the kernel has taken them.
 */
final class MessageWriter {

    private MessageWriter() {
    }

    static void write(ChannelOutboundBuffer in, RdmaConnection connection, SendWindow window, RdmaIoHandler loop,
                      int maxMessageSize) throws Exception {
        try {
            writeMessages(in, connection, window, loop, maxMessageSize);
        } finally {
            connection.flushSends(); // what went in place was held back to go out in as few system calls as it can
        }
    }

    private static void writeMessages(ChannelOutboundBuffer in, RdmaConnection connection, SendWindow window,
                                      RdmaIoHandler loop, int maxMessageSize) throws Exception {
        Object current;
        while ((current = in.current()) != null) {
            if (!window.hasRoom() && !window.block()) {
                return; // a completion posts Writable, which flushes again
            }
            if (current instanceof FileRegion region) {
                writeRegion(in, connection, window, loop, region, maxMessageSize);
                continue;
            }
            ByteBuffer[] buffers = in.nioBuffers(1024, maxMessageSize);
            int count = in.nioBufferCount();
            if (count == 0) {
                in.remove(); // an empty buffer
                continue;
            }
            ByteBuffer message;
            boolean single = count == 1 || in.nioBufferSize() > maxMessageSize;
            if (single) {
                message = buffers[0];
                if (message.remaining() > maxMessageSize) {
                    message = message.slice(message.position(), maxMessageSize);
                }
            } else {
                message = loop.gatherBuffer(maxMessageSize);
                for (int i = 0; i < count; i++) {
                    message.put(buffers[i]);
                }
                message.flip();
            }
            int n = message.remaining();
            if (single && current instanceof ByteBuf held) {
                check(window.sendInPlace(connection, message, held, true));
            } else {
                send(window, connection, message);
            }
            if (single) {
                // the outbound buffer hands out the same NIO view until its buffer is done: move it past what went
                buffers[0].position(buffers[0].position() + n);
            }
            in.removeBytes(n);
        }
    }

    /** The next message's worth of a file region: rdma4j has no sendfile, so its bytes are copied into a message. */
    private static void writeRegion(ChannelOutboundBuffer in, RdmaConnection connection, SendWindow window,
                                    RdmaIoHandler loop, FileRegion region, int maxMessageSize) throws Exception {
        if (region.transferred() >= region.count()) {
            in.remove();
            return;
        }
        ByteBuffer message = loop.gatherBuffer(maxMessageSize);
        long n = region.transferTo(new MessageFiller(message), region.transferred());
        message.flip();
        if (n <= 0 || !message.hasRemaining()) {
            throw new EOFException("file region " + region + " ended before its count: " + region.transferred()
                    + " of " + region.count() + " bytes");
        }
        send(window, connection, message);
        in.progress(n);
        if (region.transferred() >= region.count()) {
            in.remove();
        }
    }

    private static void send(SendWindow window, RdmaConnection connection, ByteBuffer message) throws Exception {
        check(window.send(connection, message));
    }

    private static void check(CompletableFuture<Void> sent) throws Exception {
        if (sent.isCompletedExceptionally()) {
            throw RdmaErrors.sendFailed(sent.exceptionNow());
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
