package io.rdma4j.core.verbs;

import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ProviderConnection.ProviderRead;
import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.nativeloader.Errno;
import io.rdma4j.nativeloader.SendQueue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * RDMA READs and WRITEs of one connection: a single request goes through the send queue's prebuilt work
 * request (the latency path, without the lists a chain needs); a batch is posted as chains of up to
 * {@link SendQueue#MAX_CHAIN} requests, one {@code ibv_post_send} each, only the last signalled, since an
 * RC queue pair completes in order (errors are reported for every request regardless). Posts happen under
 * the connection's lock, and only while {@code closedCause} says the connection is open.
 */
final class OneSidedRequests {

    private final ReentrantLock lock;
    /** Under the lock: null while the connection is open, else the exception for requests. */
    private final Supplier<RdmaException> closedCause;
    private final PostedRequests posted;
    /** Guarded by the lock: set once the queue pair exists, before the connection opens. */
    private SendQueue sendQueue;

    OneSidedRequests(ReentrantLock lock, Supplier<RdmaException> closedCause, PostedRequests posted) {
        this.lock = lock;
        this.closedCause = closedCause;
        this.posted = posted;
    }

    /** Under the lock. */
    void attach(SendQueue sendQueue) {
        this.sendQueue = sendQueue;
    }

    /** One signalled request: {@link SendQueue#RDMA_READ} into {@code local} or {@link SendQueue#RDMA_WRITE} from it. */
    CompletableFuture<Void> single(int opcode, String operation, long remoteAddress, long remoteKey, MemorySegment local,
                                   ProviderRegion localRegion) {
        CompletableFuture<Void> f = new CompletableFuture<>();
        if (local.byteSize() == 0) {
            f.complete(null); // NICs do not check keys for zero-length transfers either
            return f;
        }
        lock.lock();
        try {
            RdmaException closed = closedCause.get();
            if (closed != null) {
                f.completeExceptionally(closed);
                return f;
            }
            long wrId = posted.nextId();
            int length = (int) local.byteSize();
            int lkey = (int) localRegion.localKey();
            int rc = opcode == SendQueue.RDMA_READ
                    ? sendQueue.postRead(wrId, local.address(), length, lkey, remoteAddress, (int) remoteKey)
                    : sendQueue.postWrite(wrId, local.address(), length, lkey, remoteAddress, (int) remoteKey);
            if (rc != 0) {
                f.completeExceptionally(new RdmaException("ibv_post_send of 1 " + operation + " failed: " + Errno.name(rc)));
                return f;
            }
            posted.add(operation, f, -1);
        } finally {
            lock.unlock();
        }
        return f;
    }

    /** RDMA READs of every request, in chains. */
    List<CompletableFuture<Void>> readAll(List<ProviderRead> reads) {
        List<CompletableFuture<Void>> results = new ArrayList<>(reads.size());
        for (int from = 0; from < reads.size(); from += SendQueue.MAX_CHAIN) {
            List<ProviderRead> chunk = reads.subList(from, Math.min(reads.size(), from + SendQueue.MAX_CHAIN));
            results.addAll(chain(SendQueue.RDMA_READ, "read", chunk));
        }
        return results;
    }

    private List<CompletableFuture<Void>> chain(int opcode, String operation, List<ProviderRead> ops) {
        List<CompletableFuture<Void>> futures = new ArrayList<>(ops.size());
        List<ProviderRead> toPost = new ArrayList<>(ops.size());
        List<CompletableFuture<Void>> pending = new ArrayList<>(ops.size());
        for (ProviderRead op : ops) {
            CompletableFuture<Void> f = new CompletableFuture<>();
            futures.add(f);
            if (op.sink().byteSize() == 0) {
                f.complete(null); // NICs do not check keys for zero-length transfers either
            } else {
                toPost.add(op);
                pending.add(f);
            }
        }
        if (toPost.isEmpty()) {
            return futures;
        }
        lock.lock();
        try {
            RdmaException closed = closedCause.get();
            if (closed != null) {
                pending.forEach(f -> f.completeExceptionally(closed));
                return futures;
            }
            long firstId = posted.nextId();
            int n = toPost.size();
            for (int i = 0; i < n; i++) {
                ProviderRead op = toPost.get(i);
                sendQueue.prepareChained(i, n, opcode, firstId + i, op.sink().address(), (int) op.sink().byteSize(),
                        (int) op.localRegion().localKey(), op.remoteAddress(), (int) op.remoteKey());
            }
            int rc = sendQueue.postChain();
            if (rc != 0) {
                RdmaException e = new RdmaException("ibv_post_send of " + n + " " + operation + "(s) failed: " + Errno.name(rc));
                pending.forEach(f -> f.completeExceptionally(e));
                return futures;
            }
            posted.addOneSided(operation, pending);
        } finally {
            lock.unlock();
        }
        return futures;
    }
}
