package io.rdma4j.it.bench;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;

/**
 * The baseline: the simplest plain-NIO server doing what the tcp provider does, a blocking {@link SocketChannel}
 * per connection on its own thread. A request is a header of two longs: {@code offset, length} asks for
 * {@code length} bytes of the region at {@code offset}, written straight from its memory; {@code ECHO, length}
 * is followed by {@code length} bytes that come back as the reply.
 */
final class NioServer implements AutoCloseable {

    static final long ECHO = -1;
    static final int HEADER = 16;
    static final int MAX_ECHO = 64 * 1024;

    private final MemorySegment data;
    private final ServerSocketChannel server;
    private final List<SocketChannel> accepted = new ArrayList<>();
    private final List<Thread> serving = new ArrayList<>();

    NioServer(MemorySegment data) throws IOException {
        this.data = data;
        server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
        Thread.ofPlatform().daemon().name("nio-bench-accept").start(this::acceptLoop);
    }

    MemorySegment data() {
        return data;
    }

    InetSocketAddress address() throws IOException {
        return (InetSocketAddress) server.getLocalAddress();
    }

    private void acceptLoop() {
        try {
            while (true) {
                SocketChannel c = server.accept();
                c.setOption(StandardSocketOptions.TCP_NODELAY, true);
                synchronized (accepted) {
                    accepted.add(c);
                    serving.add(Thread.ofPlatform().daemon().name("nio-bench-serve").start(() -> serve(c)));
                }
            }
        } catch (IOException closed) {
            // the server was closed: no more connections
        }
    }

    private void serve(SocketChannel c) {
        ByteBuffer header = ByteBuffer.allocateDirect(HEADER);
        ByteBuffer echo = ByteBuffer.allocateDirect(MAX_ECHO);
        try {
            while (true) {
                header.clear();
                if (!readFully(c, header)) {
                    return;
                }
                long offset = header.getLong(0);
                int length = (int) header.getLong(8);
                ByteBuffer reply;
                if (offset == ECHO) {
                    echo.clear().limit(length);
                    if (!readFully(c, echo)) {
                        return;
                    }
                    reply = echo.flip();
                } else {
                    reply = data.asSlice(offset, length).asByteBuffer();
                }
                while (reply.hasRemaining()) {
                    c.write(reply);
                }
            }
        } catch (IOException closed) {
            // the client went away
        }
    }

    /** False at end of stream. */
    static boolean readFully(SocketChannel c, ByteBuffer into) throws IOException {
        while (into.hasRemaining()) {
            if (c.read(into) < 0) {
                return false;
            }
        }
        return true;
    }

    /** Closes every connection and waits for their threads, which may still be writing from the region's memory. */
    @Override
    public void close() throws IOException, InterruptedException {
        server.close();
        List<Thread> threads;
        synchronized (accepted) {
            for (SocketChannel c : accepted) {
                c.close();
            }
            threads = List.copyOf(serving);
        }
        for (Thread t : threads) {
            t.join(10_000);
        }
    }
}
