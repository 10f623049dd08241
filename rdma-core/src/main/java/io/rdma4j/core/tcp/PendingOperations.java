package io.rdma4j.core.tcp;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RemoteAccessException;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The requester side's table of READs and WRITEs awaiting the peer's answer, keyed by request id, and the
 * handling of the answer frames. Read data lands straight in the request's sink, on the reader thread.
 */
final class PendingOperations {

    private final TcpConnection connection;
    private final InetSocketAddress remoteAddress;
    private final AtomicLong ids = new AtomicLong();
    private final Map<Long, Pending> pending = new ConcurrentHashMap<>();

    PendingOperations(TcpConnection connection, InetSocketAddress remoteAddress) {
        this.connection = connection;
        this.remoteAddress = remoteAddress;
    }

    PendingRead newRead(MemorySegment sink) {
        return new PendingRead(ids.incrementAndGet(), sink);
    }

    PendingWrite newWrite() {
        return new PendingWrite(ids.incrementAndGet());
    }

    /** Registers an operation; false (and the operation failed) if the connection is already finished. */
    boolean track(Pending p) {
        pending.put(p.id, p);
        if (connection.isFinished() && pending.remove(p.id) != null) {
            p.fail(connection.pendingFailure());
            return false;
        }
        return true;
    }

    boolean isEmpty() {
        return pending.isEmpty();
    }

    int size() {
        return pending.size();
    }

    void receiveReadData(TcpFrameCodec.Header h, FrameInput input) throws IOException {
        if (pending.get(h.id()) instanceof PendingRead p && !p.future.isDone()) {
            if (h.length() > p.sink.byteSize() - p.received) {
                throw new ProtocolException("peer sent more data than read request " + h.id() + " asked for");
            }
            input.readFully(p.sink.asSlice(p.received, h.length()).asByteBuffer());
            p.received += h.length();
        } else {
            input.drain(h.length());
        }
    }

    void readDone(long id) {
        if (pending.get(id) instanceof PendingRead p) {
            if (p.received != p.sink.byteSize()) {
                throw new ProtocolException("peer finished read request " + id + " after " + p.received + " of "
                        + p.sink.byteSize() + " bytes");
            }
            pending.remove(id);
            p.future.complete(null);
        }
    }

    void writeAnswered(long id, RemoteAccessException error) {
        if (pending.get(id) instanceof PendingWrite p) {
            p.answer(error);
        }
    }

    void remoteError(TcpFrameCodec.Error e) {
        RemoteAccessException failure = new RemoteAccessException(e.reason(), remoteAddress + " refused: " + e.message());
        Pending p = pending.get(e.id());
        if (p instanceof PendingWrite w) {
            w.answer(failure);
        } else if (p != null && pending.remove(e.id()) != null) {
            p.fail(failure);
        }
    }

    /** Fails every operation still waiting; the connection has finished. */
    void failAll(ConnectionClosedException failure) {
        for (Long id : List.copyOf(pending.keySet())) {
            Pending p = pending.remove(id);
            if (p != null) {
                p.fail(failure);
            }
        }
    }

    abstract static class Pending {
        final long id;
        final CompletableFuture<Void> future = new CompletableFuture<>();

        Pending(long id) {
            this.id = id;
        }

        void fail(Throwable t) {
            future.completeExceptionally(t);
        }
    }

    static final class PendingRead extends Pending {
        final MemorySegment sink;
        long received; // reader thread only

        PendingRead(long id, MemorySegment sink) {
            super(id);
            this.sink = sink;
        }
    }

    /** Completes when the peer answered and our writer stopped reading the source, whichever is last. */
    final class PendingWrite extends Pending {
        private boolean answered;
        private boolean dataDone;
        private Throwable error;

        PendingWrite(long id) {
            super(id);
        }

        synchronized boolean answered() {
            return answered;
        }

        synchronized void answer(Throwable failure) {
            if (!answered) {
                answered = true;
                error = failure;
                maybeComplete();
            }
        }

        synchronized void dataDone() {
            dataDone = true;
            maybeComplete();
        }

        private void maybeComplete() {
            if (answered && dataDone && pending.remove(id, this)) {
                if (error == null) {
                    future.complete(null);
                } else {
                    future.completeExceptionally(error);
                }
            }
        }
    }
}
