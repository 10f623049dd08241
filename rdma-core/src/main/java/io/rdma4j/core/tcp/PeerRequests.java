package io.rdma4j.core.tcp;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.metrics.OperationType;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The responder side: serves the peer's READs from registered memory and lands its WRITEs there, or
 * rejects them. Each region stays pinned to the connection while a request uses it, so deregistration
 * waits for it or revokes it; a revoked region ends the request with an error frame.
 */
final class PeerRequests {

    private static final long REFUSAL_FLUSH_MILLIS = 1000;

    private final TcpConnection connection;
    private final TcpTransport transport;
    private final OutgoingFrames frames;
    private final InetSocketAddress remoteAddress;
    private final int chunkSize;
    /** Peer writes being received; touched by the reader thread only (and by releaseAll, after it stopped). */
    private final Map<Long, PeerWrite> peerWrites = new HashMap<>();
    /** Requests refused on this connection; reader thread only. */
    private int rejections;

    PeerRequests(TcpConnection connection, TcpTransport transport, OutgoingFrames frames,
                 InetSocketAddress remoteAddress, int chunkSize) {
        this.connection = connection;
        this.transport = transport;
        this.frames = frames;
        this.remoteAddress = remoteAddress;
        this.chunkSize = chunkSize;
    }

    void serveRead(TcpFrameCodec.Request r) {
        TcpRegion region;
        try {
            region = transport.authorize(connection, r.key(), r.address(), r.length(), Access.REMOTE_READ);
        } catch (RemoteAccessException e) {
            reject(r, e);
            return;
        }
        frames.enqueueResponse(new ServeRead(r.id(), region, r.address() - region.segment().address(), r.length()),
                TcpFrameCodec.HEADER_SIZE + r.length());
    }

    void acceptWrite(TcpFrameCodec.Request r) {
        if (peerWrites.containsKey(r.id())) {
            throw new ProtocolException("peer reused write request id " + r.id());
        }
        TcpRegion region;
        try {
            region = transport.authorize(connection, r.key(), r.address(), r.length(), Access.REMOTE_WRITE);
        } catch (RemoteAccessException e) {
            // Its data frames follow anyway; they are drained as belonging to no live write.
            reject(r, e);
            return;
        }
        if (r.length() == 0) {
            region.unpin(connection);
            transport.metrics().recordServed(OperationType.WRITE, 0);
            respond(TcpFrameCodec.encodeEmpty(TcpFrameCodec.WRITE_ACK, r.id()));
            return;
        }
        peerWrites.put(r.id(), new PeerWrite(region, r.address() - region.segment().address(), r.length()));
    }

    void receiveWriteData(TcpFrameCodec.Header h, FrameInput input) throws IOException {
        PeerWrite w = peerWrites.get(h.id());
        if (w == null) {
            input.drain(h.length());
            return;
        }
        if (h.length() > w.length - w.received) {
            throw new ProtocolException("peer sent more data than its write request " + h.id() + " announced");
        }
        if (w.region.isRevoked()) {
            peerWrites.remove(h.id());
            w.region.unpin(connection);
            respond(TcpFrameCodec.encodeError(h.id(), RemoteAccessException.Reason.RESPONDER_ERROR,
                    "the region was deregistered during the write"));
            input.drain(h.length());
            return;
        }
        input.readFully(w.region.segment().asSlice(w.offset + w.received, h.length()).asByteBuffer());
        w.received += h.length();
        if (w.received == w.length) {
            peerWrites.remove(h.id());
            w.region.unpin(connection);
            transport.metrics().recordServed(OperationType.WRITE, w.length);
            respond(TcpFrameCodec.encodeEmpty(TcpFrameCodec.WRITE_ACK, h.id()));
        }
    }

    private void respond(ByteBuffer frame) {
        frames.enqueueResponse(new OutgoingFrames.Control(frame), frame.remaining());
    }

    /**
     * Refuses a request. The peer learns only the reason code: the region's address and size, which would help
     * it probe, go to this side's log with the peer's address. After max-rejections refusals the connection is
     * closed once the last refusal is written, so keys cannot be guessed at line rate.
     */
    private void reject(TcpFrameCodec.Request r, RemoteAccessException e) {
        String what = (r.type() == TcpFrameCodec.READ_REQ ? "read" : "write") + " of " + r.length() + " bytes by "
                + remoteAddress + ": " + e.getMessage();
        transport.rejected(what);
        rejections++;
        CompletableFuture<Void> written = new CompletableFuture<>();
        ByteBuffer frame = TcpFrameCodec.encodeError(r.id(), e.reason(), refusal(e.reason()));
        frames.enqueueResponse(new OutgoingFrames.Control(written, frame), frame.remaining());
        int max = transport.options().maxRejections();
        if (rejections >= max) {
            frames.flush();
            try {
                written.get(REFUSAL_FLUSH_MILLIS, TimeUnit.MILLISECONDS);
            } catch (ExecutionException | TimeoutException ignored) {
                // the peer does not read: it loses the connection without the last refusal
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
            throw new ConnectionClosedException("closed the connection from " + remoteAddress + " after " + rejections
                    + " refused requests (tcp.max-rejections " + max + ")");
        }
    }

    /** The refusal text a peer gets: the reason and what to do, nothing about the region. */
    private String refusal(RemoteAccessException.Reason reason) {
        return switch (reason) {
            case TOO_LARGE -> "the request exceeds the responder's tcp.max-request-bytes "
                    + transport.options().maxRequestBytes() + "; split it";
            case UNKNOWN_KEY -> "no live region has this key; ask the owner for a current descriptor";
            case OUT_OF_RANGE -> "the range is outside the region; check the descriptor and offset";
            case ACCESS_DENIED -> "the region was not registered for this access";
            default -> "the request was refused";
        };
    }

    /** Unpins the regions of peer writes still being received; called once the reader stopped. */
    void releaseAll() {
        for (PeerWrite pw : peerWrites.values()) {
            pw.region.unpin(connection);
        }
        peerWrites.clear();
    }

    private static final class PeerWrite {
        final TcpRegion region;
        final long offset;
        final long length;
        long received;

        PeerWrite(TcpRegion region, long offset, long length) {
            this.region = region;
            this.offset = offset;
            this.length = length;
        }
    }

    /** Streams a served read from the registered region, a chunk per turn, checking revocation between chunks. */
    private final class ServeRead implements OutgoingFrames.Outgoing {
        final long id;
        final TcpRegion region;
        final long offset;
        final long length;
        long sent;
        /** Whether the turn being written ends the read (its last data, or an error instead). */
        boolean last;
        final AtomicBoolean released = new AtomicBoolean();

        ServeRead(long id, TcpRegion region, long offset, long length) {
            this.id = id;
            this.region = region;
            this.offset = offset;
            this.length = length;
        }

        @Override
        public ByteBuffer[] nextTurn() {
            if (region.isRevoked()) {
                return refuse("the region was deregistered during the read");
            }
            int n = (int) Math.min(chunkSize, length - sent);
            if (n == 0) {
                last = true;
                return new ByteBuffer[] {TcpFrameCodec.encodeEmpty(TcpFrameCodec.READ_DONE, id)};
            }
            ByteBuffer data;
            try {
                data = region.segment().asSlice(offset + sent, n).asByteBuffer();
            } catch (RuntimeException e) {
                // The memory was freed without deregistering it first: refuse instead of crashing.
                return refuse("the region's memory is no longer accessible");
            }
            ByteBuffer header = ByteBuffer.allocate(TcpFrameCodec.HEADER_SIZE);
            TcpFrameCodec.putHeader(header, TcpFrameCodec.READ_DATA, n, id);
            sent += n;
            if (sent == length) {
                last = true;
                return new ByteBuffer[] {header.flip(), data, TcpFrameCodec.encodeEmpty(TcpFrameCodec.READ_DONE, id)};
            }
            return new ByteBuffer[] {header.flip(), data};
        }

        private ByteBuffer[] refuse(String why) {
            release();
            last = true;
            return new ByteBuffer[] {TcpFrameCodec.encodeError(id, RemoteAccessException.Reason.RESPONDER_ERROR, why)};
        }

        @Override
        public boolean turnWritten() {
            if (!last) {
                return true;
            }
            if (release()) { // not released before: served, not refused
                transport.metrics().recordServed(OperationType.READ, length);
            }
            return false;
        }

        /** Unpins the region, once; true the first time. */
        private boolean release() {
            if (released.compareAndSet(false, true)) {
                region.unpin(connection);
                return true;
            }
            return false;
        }

        @Override
        public void abort(ConnectionClosedException cause) {
            release();
        }
    }
}
