package io.rdma4j.core.tcp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;

/**
 * The socket as is. Blocking during the handshake; once frames flow it is non-blocking, so that any thread can
 * try a write without ever blocking on a peer that does not read ({@link OutgoingFrames}), and the reader and
 * writer threads wait for the socket each with a selector of their own (the writer's opened the first time the
 * socket is full).
 */
final class PlainChannel implements FrameChannel {

    private final SocketChannel socket;
    private volatile boolean nonBlocking;
    private volatile Selector readable;
    private volatile Selector writable;

    PlainChannel(SocketChannel socket) {
        this.socket = socket;
    }

    @Override
    public void startFrames() throws IOException {
        socket.configureBlocking(false);
        readable = Selector.open();
        try {
            socket.register(readable, SelectionKey.OP_READ);
        } catch (IOException | RuntimeException e) {
            readable.close();
            throw e;
        }
        nonBlocking = true;
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        if (!nonBlocking) {
            return socket.read(dst);
        }
        while (true) {
            int n = socket.read(dst);
            if (n != 0 || !dst.hasRemaining()) {
                return n;
            }
            readable.select();
            readable.selectedKeys().clear();
            if (!socket.isOpen()) {
                throw new ClosedChannelException();
            }
        }
    }

    @Override
    public long write(ByteBuffer[] srcs) throws IOException {
        if (!nonBlocking) {
            return socket.write(srcs);
        }
        while (true) {
            long n = socket.write(srcs);
            if (n != 0 || !hasRemaining(srcs)) {
                return n;
            }
            Selector s = writeSelector();
            if (!socket.isOpen()) {
                throw new ClosedChannelException();
            }
            s.select();
            s.selectedKeys().clear();
            if (!socket.isOpen()) {
                throw new ClosedChannelException();
            }
        }
    }

    @Override
    public boolean writesWithoutBlocking() {
        return nonBlocking;
    }

    @Override
    public long tryWrite(ByteBuffer[] srcs) throws IOException {
        return socket.write(srcs);
    }

    private Selector writeSelector() throws IOException {
        Selector s = writable;
        if (s == null) {
            s = Selector.open();
            try {
                socket.register(s, SelectionKey.OP_WRITE);
            } catch (IOException | RuntimeException e) {
                s.close();
                throw e;
            }
            writable = s;
        }
        return s;
    }

    private static boolean hasRemaining(ByteBuffer[] srcs) {
        for (ByteBuffer b : srcs) {
            if (b.hasRemaining()) {
                return true;
            }
        }
        return false;
    }

    @Override
    public void wakeUp() {
        Selector r = readable;
        if (r != null) {
            r.wakeup();
        }
        Selector w = writable;
        if (w != null) {
            w.wakeup();
        }
    }

    @Override
    public void release() {
        closeQuietly(readable);
        closeQuietly(writable);
    }

    private static void closeQuietly(Selector s) {
        if (s != null) {
            try {
                s.close();
            } catch (IOException ignored) {
                // nothing left to release
            }
        }
    }

    @Override
    public byte[] binding() {
        return new byte[0];
    }
}
