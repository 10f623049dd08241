package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicBoolean;

/** Sends a write request and its data, a chunk per turn; stops early once the peer refused it. */
final class OutgoingWrite implements OutgoingFrames.Outgoing {
    private final PendingOperations.PendingWrite op;
    private final long remoteAddress;
    private final long key;
    private final MemorySegment source;
    private final int chunkSize;
    private boolean requested;
    private long sent;
    private final AtomicBoolean done = new AtomicBoolean();

    OutgoingWrite(PendingOperations.PendingWrite op, long remoteAddress, long key, MemorySegment source, int chunkSize) {
        this.op = op;
        this.remoteAddress = remoteAddress;
        this.key = key;
        this.source = source;
        this.chunkSize = chunkSize;
    }

    @Override
    public boolean writeTo(OutgoingFrames frames) throws IOException {
        ByteBuffer request = null;
        if (!requested) {
            requested = true;
            request = TcpFrameCodec.encodeRequest(TcpFrameCodec.WRITE_REQ, op.id, remoteAddress, source.byteSize(), key);
        }
        int n = (int) Math.min(chunkSize, source.byteSize() - sent);
        if (n == 0 || op.answered()) {
            if (request != null) {
                frames.writeFully(request);
            }
            finishData();
            return false;
        }
        ByteBuffer header = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE);
        TcpFrameCodec.putHeader(header, TcpFrameCodec.WRITE_DATA, n, op.id);
        ByteBuffer data = source.asSlice(sent, n).asByteBuffer();
        if (request != null) {
            frames.writeFully(request, header.flip(), data);
        } else {
            frames.writeFully(header.flip(), data);
        }
        sent += n;
        if (sent == source.byteSize()) {
            finishData();
            return false;
        }
        return true;
    }

    private void finishData() {
        if (done.compareAndSet(false, true)) {
            op.dataDone();
        }
    }

    @Override
    public void abort(ConnectionClosedException cause) {
        op.answer(cause);
        finishData();
    }
}
