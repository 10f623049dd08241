package io.rdma4j.core.internal;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.core.spi.ProviderConnection;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * A connection's one-sided operations (READ, WRITE: checks, splitting at the largest operation, batching) and the
 * tracking every provider operation of the connection goes through, sends included: its operation slot, the pin
 * on its local region, its timeout, its metrics, and the future its caller sees.
 */
final class TrackedOperations {

    private static final int BATCH_GROUP = 64;
    /**
     * A caller waiting for an operation of at most this many bytes checks for its end briefly before sleeping
     * ({@link ProviderConnection#spinWait}); a larger one takes longer than a wake-up, and a spinning caller would
     * take a CPU from the threads moving its data.
     */
    private static final long SPIN_MAX_BYTES = 64 << 10;

    private final DefaultConnection connection;
    private final DefaultRdmaTransport transport;
    private final ProviderConnection pc;
    private final OperationSlots slots;
    private final Duration timeout;
    private final long timeoutNanos; // read by every operation: Duration.toNanos() checks for overflow each time

    TrackedOperations(DefaultConnection connection, DefaultRdmaTransport transport, ProviderConnection pc, OperationSlots slots) {
        this.connection = connection;
        this.transport = transport;
        this.pc = pc;
        this.slots = slots;
        this.timeout = transport.config().operationTimeout();
        this.timeoutNanos = timeout.toNanos();
    }

    CompletableFuture<Void> read(RegionDescriptor remote, long remoteOffset, MemorySegment sink) {
        return readAll(List.of(new ReadRequest(remote, remoteOffset, sink)));
    }

    CompletableFuture<Void> readAll(List<ReadRequest> reads) {
        List<CompletableFuture<Void>> results = new ArrayList<>();
        try {
            connection.checkOpen();
            List<Op> ops = new ArrayList<>(reads.size());
            for (ReadRequest r : reads) {
                checkRemote(r.remote(), r.remoteOffset(), r.sink().byteSize(), Access.REMOTE_READ);
                DefaultRegion local = transport.localRegion(r.sink(), Access.LOCAL_WRITE);
                split(ops, r.remote(), r.remoteOffset(), r.sink(), local);
            }
            for (int from = 0; from < ops.size(); from += BATCH_GROUP) {
                List<Op> group = ops.subList(from, Math.min(ops.size(), from + BATCH_GROUP));
                results.addAll(startGroup(OperationType.READ, group));
            }
            return Futures.allOf(results);
        } catch (RuntimeException e) {
            if (results.isEmpty()) {
                return CompletableFuture.failedFuture(e);
            }
            // Earlier groups' READs are posted: the sinks are the caller's again only once those are over.
            return CompletableFuture.allOf(results.toArray(CompletableFuture[]::new)).handle((v, ignored) -> {
                throw e;
            });
        }
    }

    void readAndWait(RegionDescriptor remote, long remoteOffset, MemorySegment sink) {
        connection.checkOpen();
        checkRemote(remote, remoteOffset, sink.byteSize(), Access.REMOTE_READ);
        DefaultRegion local = transport.localRegion(sink, Access.LOCAL_WRITE);
        if (sink.byteSize() > transport.maxOperationLength()) {
            // split into several operations: the asynchronous path knows how
            Futures.awaitResult(read(remote, remoteOffset, sink));
            return;
        }
        Tracker t = begin(OperationType.READ, sink.byteSize(), local);
        CompletableFuture<Void> op;
        try {
            op = pc.read(remote.address() + remoteOffset, remote.key(), sink, local.providerRegion());
        } catch (RuntimeException e) {
            op = CompletableFuture.failedFuture(e);
        }
        if (sink.byteSize() <= SPIN_MAX_BYTES) {
            pc.spinWait(op::isDone);
        }
        if (!pc.await(op, t.startNanos + timeoutNanos)) {
            t.onTimeout();
            // The provider fails the operation once the connection is closed; only then is the sink free.
            pc.await(op, System.nanoTime() + Long.MAX_VALUE / 2);
        }
        Throwable cause = t.settle(op.isCompletedExceptionally() ? op.exceptionNow() : null);
        if (cause != null) {
            throw Futures.rethrowable(cause);
        }
    }

    CompletableFuture<Void> write(RegionDescriptor remote, long remoteOffset, MemorySegment source) {
        try {
            connection.checkOpen();
            checkRemote(remote, remoteOffset, source.byteSize(), Access.REMOTE_WRITE);
            DefaultRegion local = transport.localRegion(source, null);
            List<Op> ops = new ArrayList<>();
            split(ops, remote, remoteOffset, source, local);
            List<CompletableFuture<Void>> results = new ArrayList<>(ops.size());
            for (Op op : ops) {
                results.add(start(OperationType.WRITE, op.local.byteSize(), op.region,
                        () -> pc.write(op.remoteAddress, op.key, op.local, op.region.providerRegion()), true));
            }
            return Futures.allOf(results);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private void checkRemote(RegionDescriptor remote, long offset, long length, Access right) {
        if (!remote.provider().equals(transport.provider())) {
            throw new IllegalArgumentException("descriptor of a '" + remote.provider() + "' region cannot be used on a '"
                    + transport.provider() + "' connection");
        }
        remote.checkRange(offset, length);
        if (!remote.allows(right)) {
            throw new RemoteAccessException(RemoteAccessException.Reason.ACCESS_DENIED,
                    "the remote region was not registered with " + right);
        }
    }

    private void split(List<Op> ops, RegionDescriptor remote, long remoteOffset, MemorySegment local, DefaultRegion region) {
        long max = transport.maxOperationLength();
        long length = local.byteSize();
        long done = 0;
        do {
            long n = Math.min(max, length - done);
            ops.add(new Op(remote.address() + remoteOffset + done, remote.key(), local.asSlice(done, n), region));
            done += n;
        } while (done < length);
    }

    private List<CompletableFuture<Void>> startGroup(OperationType type, List<Op> group) {
        List<CompletableFuture<Void>> results = new ArrayList<>(group.size());
        if (group.size() == 1) {
            Op op = group.getFirst();
            results.add(start(type, op.local.byteSize(), op.region,
                    () -> pc.read(op.remoteAddress, op.key, op.local, op.region.providerRegion()), true));
            return results;
        }
        List<ProviderConnection.ProviderRead> batch = new ArrayList<>(group.size());
        List<Tracker> trackers = new ArrayList<>(group.size());
        try {
            for (Op op : group) {
                trackers.add(begin(type, op.local.byteSize(), op.region));
                batch.add(new ProviderConnection.ProviderRead(op.remoteAddress, op.key, op.local, op.region.providerRegion()));
            }
        } catch (RuntimeException e) {
            for (Tracker t : trackers) {
                t.finish(null, e);
            }
            throw e;
        }
        List<CompletableFuture<Void>> posted;
        try {
            posted = pc.readAll(batch);
        } catch (RuntimeException e) {
            posted = new ArrayList<>();
            for (int i = 0; i < batch.size(); i++) {
                posted.add(CompletableFuture.failedFuture(e));
            }
        }
        results.add(followGroup(type, trackers, posted));
        return results;
    }

    /**
     * The user's future for a posted group: one timeout timer and one hand-off to the completion executor for
     * the whole group, not a timer and an executor task per operation.
     * Each operation still gives back its slot and pin as soon as it completes. Fails with the failure of the
     * first operation, in the group's order, that failed.
     */
    private CompletableFuture<Void> followGroup(OperationType type, List<Tracker> trackers, List<CompletableFuture<Void>> posted) {
        long groupBytes = 0;
        for (Tracker t : trackers) {
            groupBytes += t.bytes;
        }
        OperationFuture<Void> result = new OperationFuture<>(pc, transport.completions(), groupBytes <= SPIN_MAX_BYTES);
        int n = trackers.size();
        Throwable[] failures = new Throwable[n];
        AtomicInteger remaining = new AtomicInteger(n);
        var timer = transport.timers().schedule(() -> {
            long bytes = 0; // summed only for the message: most groups never time out
            for (Tracker t : trackers) {
                bytes += t.bytes;
            }
            RdmaTimeoutException timedOut = new RdmaTimeoutException(n + " " + type.tagValue() + "s of " + bytes
                    + " bytes did not all complete within " + timeout + "; closing " + connection + " (peer unresponsive)");
            for (Tracker t : trackers) {
                t.timedOut = timedOut;
            }
            connection.closeWith(timedOut);
        }, timeoutNanos, TimeUnit.NANOSECONDS);
        for (int i = 0; i < n; i++) {
            int index = i;
            posted.get(i).whenComplete((v, error) -> {
                failures[index] = trackers.get(index).settle(error);
                if (remaining.decrementAndGet() > 0) {
                    return;
                }
                timer.cancel(false);
                Throwable failure = null;
                for (Throwable f : failures) {
                    if (f != null) {
                        failure = f;
                        break;
                    }
                }
                result.settle(null, failure);
            });
        }
        return result;
    }

    /** {@code usersFuture}: see {@link Tracker#follow}. */
    CompletableFuture<Void> start(OperationType type, long bytes, DefaultRegion region,
                                          Supplier<CompletableFuture<Void>> action, boolean usersFuture) {
        return start(type, bytes, region, action, usersFuture, null);
    }

    /** {@code executor}: where the user's future is completed; null for the transport's completion threads. */
    CompletableFuture<Void> start(OperationType type, long bytes, DefaultRegion region,
                                  Supplier<CompletableFuture<Void>> action, boolean usersFuture, Executor executor) {
        Tracker t = begin(type, bytes, region);
        CompletableFuture<Void> providerFuture;
        try {
            providerFuture = action.get();
        } catch (RuntimeException e) {
            providerFuture = CompletableFuture.failedFuture(e);
        }
        return t.follow(providerFuture, usersFuture, executor);
    }

    /** Completions run on {@code executor} (the completion threads when it is null, or when it rejects a task). */
    private Executor completionsOn(Executor executor) {
        Executor completions = transport.completions();
        if (executor == null) {
            return completions;
        }
        return task -> {
            try {
                executor.execute(task);
            } catch (RejectedExecutionException e) {
                completions.execute(task);
            }
        };
    }

    /** Takes a back-pressure permit and pins the local region; the tracker gives both back. */
    private Tracker begin(OperationType type, long bytes, DefaultRegion region) {
        slots.acquire();
        if (region != null && !region.pin()) {
            slots.cancel();
            throw new IllegalStateException("the local region was closed");
        }
        slots.occupy();
        return new Tracker(type, bytes, region);
    }

    /** One provider operation in flight: times it out, and completes the user's future off the I/O thread. */
    private final class Tracker {
        private final OperationType type;
        private final long bytes;
        private final DefaultRegion region;
        private final long startNanos = System.nanoTime();
        /** The user's future, made by follow() only: readAndWait settles without one. */
        private CompletableFuture<Void> result;
        private volatile RdmaTimeoutException timedOut;

        Tracker(OperationType type, long bytes, DefaultRegion region) {
            this.type = type;
            this.bytes = bytes;
            this.region = region;
        }

        /**
         * The future of the provider's operation, as the user's ({@code usersFuture}: completed off the I/O thread)
         * or this package's own (completed as soon as the operation is).
         */
        CompletableFuture<Void> follow(CompletableFuture<Void> providerFuture, boolean usersFuture, Executor executor) {
            CompletableFuture<Void> result = usersFuture
                    ? new OperationFuture<>(pc, completionsOn(executor), bytes <= SPIN_MAX_BYTES) : new CompletableFuture<>();
            this.result = result;
            var timer = transport.timers().schedule(this::onTimeout, timeoutNanos, TimeUnit.NANOSECONDS);
            providerFuture.whenComplete((v, error) -> {
                timer.cancel(false);
                finish(v, error);
            });
            return result;
        }

        void onTimeout() {
            timedOut = new RdmaTimeoutException(type.tagValue() + " of " + bytes + " bytes did not complete within "
                    + timeout + "; closing " + connection + " (peer unresponsive)");
            // Closing makes the provider fail the operation; we report the timeout only once the provider
            // has let go of the buffer, so nothing lands in it after the caller sees the failure.
            connection.closeWith(timedOut);
        }

        void finish(Void v, Throwable error) {
            Throwable failure = settle(error);
            if (result == null) {
                return; // never followed: the caller that began it rethrows the failure itself
            }
            if (result instanceof OperationFuture<Void> users) {
                users.settle(null, failure);
            } else if (failure == null) {
                result.complete(null);
            } else {
                result.completeExceptionally(failure);
            }
        }

        /** Gives the slot and the pin back, records metrics; the cause the user sees, or null. */
        Throwable settle(Throwable error) {
            slots.free();
            if (region != null) {
                region.unpin();
            }
            Throwable cause = error == null ? null : Futures.unwrap(error);
            if (cause != null && timedOut != null) {
                cause = timedOut;
            }
            if (cause instanceof RemoteAccessException rejected) {
                // On an RDMA NIC a remote access error moves the queue pair to the error state; every
                // provider behaves the same, so callers handle one semantics: reconnect after a rejection.
                connection.closeWith(new ConnectionClosedException("peer rejected a " + type.tagValue() + " (" + rejected.reason()
                        + "); the connection is closed, as an RDMA queue pair would be", rejected));
            }
            transport.metrics().operationFinished(type, bytes, System.nanoTime() - startNanos, cause == null);
            return cause;
        }
    }

    private record Op(long remoteAddress, long key, MemorySegment local, DefaultRegion region) {
    }
}
