package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicBoolean;

/** Sends a write request and its data, a chunk per turn; stops early once the peer refused it. */
final class OutgoingWrite implements OutgoingFrames.Outgoing {
    private static final ByteBuffer[] NOTHING = new ByteBuffer[0];

    private final PendingOperations.PendingWrite op;
    private final long remoteAddress;
    private final long key;
    private final MemorySegment source;
    private final int chunkSize;
    private boolean requested;
    private long sent;
    /** Bytes of the turn being written. */
    private int chunk;
    private final AtomicBoolean done = new AtomicBoolean();

    OutgoingWrite(PendingOperations.PendingWrite op, long remoteAddress, long key, MemorySegment source, int chunkSize) {
        this.op = op;
        this.remoteAddress = remoteAddress;
        this.key = key;
        this.source = source;
        this.chunkSize = chunkSize;
    }

    @Override
    public ByteBuffer[] nextTurn() {
        ByteBuffer request = null;
        if (!requested) {
            requested = true;
            request = TcpFrameCodec.encodeRequest(TcpFrameCodec.WRITE_REQ, op.id, remoteAddress, source.byteSize(), key);
        }
        chunk = (int) Math.min(chunkSize, source.byteSize() - sent);
        if (chunk == 0 || op.answered()) {
            chunk = 0;
            return request == null ? NOTHING : new ByteBuffer[] {request};
        }
        ByteBuffer header = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE);
        TcpFrameCodec.putHeader(header, TcpFrameCodec.WRITE_DATA, chunk, op.id);
        ByteBuffer data = source.asSlice(sent, chunk).asByteBuffer();
        return request == null ? new ByteBuffer[] {header.flip(), data} : new ByteBuffer[] {request, header.flip(), data};
    }

    @Override
    public boolean turnWritten() {
        sent += chunk;
        if (chunk == 0 || sent == source.byteSize()) {
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
