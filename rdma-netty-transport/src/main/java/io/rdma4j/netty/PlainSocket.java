package io.rdma4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.FileRegion;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.util.function.Consumer;

/**
 * A channel's connection to a peer that does not run rdma4j ({@link RdmaChannelOption#TCP_FALLBACK}): a plain
 * non-blocking TCP socket, watched by the channel's loop where it waits for rdma4j's connections, read and written
 * as Netty's NIO channel does: reads through the channel's {@code RecvByteBufAllocator}, gathering writes until the
 * socket is full and then on {@code OP_WRITE}, the peer's end of stream as half-closure or a close. Loop thread only.
 */
final class PlainSocket {

    private final RdmaSocketChannel channel;
    private final SocketChannel socket;
    /** While the channel is registered with a loop. */
    private SelectionKey key;
    /** The operations watched, kept while the channel moves between loops. */
    private int interest;
    /** While connecting: told of the outcome (null on success). */
    private Consumer<Throwable> connecting;
    private boolean readRequested;
    private boolean inputClosedSeenErrorOnRead;

    private PlainSocket(RdmaSocketChannel channel, SocketChannel socket) {
        this.channel = channel;
        this.socket = socket;
    }

    static PlainSocket open(RdmaSocketChannel channel) throws IOException {
        SocketChannel socket = SocketChannel.open();
        try {
            socket.configureBlocking(false);
            socket.setOption(StandardSocketOptions.TCP_NODELAY, true);
            return new PlainSocket(channel, socket);
        } catch (IOException | RuntimeException e) {
            socket.close();
            throw e;
        }
    }

    /** Starts connecting to {@code remote}; {@code done} learns the outcome on the loop (null: connected). */
    void connect(InetSocketAddress remote, Consumer<Throwable> done) {
        try {
            if (socket.connect(remote)) {
                done.accept(null);
                return;
            }
            connecting = done;
            interest(SelectionKey.OP_CONNECT, true);
        } catch (IOException | RuntimeException e) {
            done.accept(e);
        }
    }

    /** The channel registered with {@code loop}: the socket is watched there. */
    void register(RdmaIoHandler loop) throws IOException {
        key = loop.watch(socket, interest, this::ready);
    }

    void deregister() {
        if (key != null) {
            key.cancel();
            key = null;
        }
    }

    private void interest(int op, boolean on) {
        interest = on ? interest | op : interest & ~op;
        if (key != null) {
            try {
                key.interestOps(interest);
            } catch (CancelledKeyException e) {
                key = null; // the loop's poller closed: the channel is being closed with it
            }
        }
    }

    private void ready(int ops) {
        if ((ops & SelectionKey.OP_CONNECT) != 0) {
            finishConnect();
        }
        if ((ops & SelectionKey.OP_WRITE) != 0) {
            interest(SelectionKey.OP_WRITE, false);
            channel.flushNow();
        }
        if ((ops & SelectionKey.OP_READ) != 0) {
            read();
        }
    }

    private void finishConnect() {
        Consumer<Throwable> done = connecting;
        try {
            if (!socket.finishConnect()) {
                return;
            }
            interest(SelectionKey.OP_CONNECT, false);
            connecting = null;
            done.accept(null);
        } catch (IOException | RuntimeException e) {
            interest(SelectionKey.OP_CONNECT, false);
            connecting = null;
            done.accept(e);
        }
    }

    // ---- reading ----

    void beginRead() {
        if (inputClosedSeenErrorOnRead) {
            return;
        }
        readRequested = true;
        interest(SelectionKey.OP_READ, true);
    }

    void autoReadCleared() {
        readRequested = false;
        interest(SelectionKey.OP_READ, false);
    }

    private void read() {
        RecvByteBufAllocator.Handle handle = channel.unsafe().recvBufAllocHandle();
        handle.reset(channel.config());
        ChannelPipeline pipeline = channel.pipeline();
        boolean end = false;
        ByteBuf buf = null;
        try {
            do {
                buf = handle.allocate(channel.config().getAllocator());
                handle.attemptedBytesRead(buf.writableBytes());
                handle.lastBytesRead(buf.writeBytes(socket, buf.writableBytes()));
                if (handle.lastBytesRead() <= 0) {
                    buf.release();
                    buf = null;
                    end = handle.lastBytesRead() < 0;
                    break;
                }
                handle.incMessagesRead(1);
                readRequested = false;
                pipeline.fireChannelRead(buf);
                buf = null;
            } while (handle.continueReading() && channel.isActive());
            handle.readComplete();
            pipeline.fireChannelReadComplete();
            if (end) {
                endOfInput();
            }
        } catch (IOException | RuntimeException e) {
            if (buf != null) {
                buf.release();
            }
            handle.readComplete();
            pipeline.fireChannelReadComplete();
            pipeline.fireExceptionCaught(e);
            if (e instanceof IOException) {
                channel.closeNow();
            }
        } finally {
            if (!readRequested && !channel.config().isAutoRead()) {
                interest(SelectionKey.OP_READ, false);
            }
        }
    }

    /** The peer ended its stream: the input shuts down (half-closure allowed), else the channel closes. */
    private void endOfInput() {
        if (!channel.isActive()) {
            return;
        }
        if (!channel.inputShutdown()) {
            if (!channel.config().isAllowHalfClosure()) {
                channel.closeNow();
                return;
            }
            shutdownInput();
            channel.pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
        } else if (!inputClosedSeenErrorOnRead) {
            inputClosedSeenErrorOnRead = true;
            interest(SelectionKey.OP_READ, false);
            channel.pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
        }
    }

    // ---- writing, half-close and close ----

    /** Writes what the outbound buffer holds until it is empty, or the socket is full and {@code OP_WRITE} waits. */
    void write(ChannelOutboundBuffer in) throws IOException {
        while (!in.isEmpty()) {
            if (in.current() instanceof FileRegion region) {
                long n = region.transferTo(socket, region.transferred());
                if (region.transferred() >= region.count()) {
                    in.remove();
                    continue;
                }
                if (n <= 0) {
                    interest(SelectionKey.OP_WRITE, true);
                    return;
                }
                in.progress(n);
                continue;
            }
            ByteBuffer[] buffers = in.nioBuffers(1024, Integer.MAX_VALUE);
            int count = in.nioBufferCount();
            if (count == 0) {
                in.remove(); // an empty buffer
                continue;
            }
            long n = socket.write(buffers, 0, count);
            if (n <= 0) {
                interest(SelectionKey.OP_WRITE, true);
                return;
            }
            in.removeBytes(n);
        }
        interest(SelectionKey.OP_WRITE, false);
    }

    void shutdownOutput() throws IOException {
        socket.shutdownOutput();
    }

    void shutdownInput() {
        channel.markInputShutdown();
        try {
            socket.shutdownInput();
        } catch (IOException e) {
            // already shut or closed: reads end either way
        }
    }

    /** Closes the socket; {@code reset}: with SO_LINGER 0, so the peer sees a reset. */
    void close(boolean reset) {
        deregister();
        try {
            if (reset && socket.isOpen()) {
                socket.setOption(StandardSocketOptions.SO_LINGER, 0);
            }
        } catch (IOException ignored) {
            // closing anyway
        }
        try {
            socket.close();
        } catch (IOException ignored) {
            // nothing left to release
        }
    }

    SocketAddress localAddress() {
        try {
            return socket.getLocalAddress();
        } catch (IOException e) {
            return null;
        }
    }

    SocketAddress remoteAddress() {
        try {
            return socket.getRemoteAddress();
        } catch (IOException e) {
            return null;
        }
    }
}
