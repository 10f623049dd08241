package io.rdma4j.it.bench;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;

/** One blocking connection to a {@link NioServer}: requests written at once, replies read into a sink. */
final class NioClient implements AutoCloseable {

    private static final int MAX_BATCH = 64;

    private final SocketChannel channel;
    private final MemorySegment sink;
    private final ByteBuffer requests = ByteBuffer.allocateDirect(NioServer.HEADER * MAX_BATCH);
    private final ByteBuffer[] echoRequest = {ByteBuffer.allocateDirect(NioServer.HEADER), null};

    NioClient(InetSocketAddress server, MemorySegment sink) throws IOException {
        channel = SocketChannel.open(server);
        channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
        this.sink = sink;
    }

    /** {@code depth} reads of {@code length} bytes from {@code offset} on, all asked for before any reply is read. */
    void readBatch(long offset, int length, int depth) throws IOException {
        requests.clear();
        for (int i = 0; i < depth; i++) {
            requests.putLong(offset + (long) i * length).putLong(length);
        }
        requests.flip();
        while (requests.hasRemaining()) {
            channel.write(requests);
        }
        if (!NioServer.readFully(channel, sink.asSlice(0, (long) depth * length).asByteBuffer())) {
            throw new IOException("server closed");
        }
    }

    /** Sends {@code body} (left as it was) and reads the echo into {@code reply}, which it fills. */
    void roundTrip(ByteBuffer body, ByteBuffer reply) throws IOException {
        ByteBuffer header = echoRequest[0].clear().putLong(NioServer.ECHO).putLong(body.remaining()).flip();
        echoRequest[1] = body.duplicate();
        while (header.hasRemaining() || echoRequest[1].hasRemaining()) {
            channel.write(echoRequest);
        }
        if (!NioServer.readFully(channel, reply.clear().limit(body.remaining()))) {
            throw new IOException("server closed");
        }
    }

    MemorySegment sink() {
        return sink;
    }

    @Override
    public void close() throws IOException {
        channel.close();
    }
}
