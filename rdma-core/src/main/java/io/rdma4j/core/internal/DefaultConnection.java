package io.rdma4j.core.internal;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.Peer;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestContext;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.core.spi.ConnectionEvents;
import io.rdma4j.core.spi.ProviderConnection;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * The provider-independent connection: checks, back-pressure, timeouts, splitting, metrics, the
 * inbox of two-sided messages and the request/reply channel on top of them (every message carries a
 * {@link MessageHeader}).
 *
 * <p>A peer may have at most max-outstanding-operations requests in this side's handlers at once; further
 * requests get a {@link RemoteRequestException.Status#BUSY} reply and the connection stays open (a peer that
 * runs the same rdma4j with the same limit never sees one: its requests hold operation slots until replied).
 */
final class DefaultConnection implements RdmaConnection, ConnectionEvents {

    private static final System.Logger LOG = System.getLogger(DefaultConnection.class.getName());

    /** A peer may queue this many unreceived messages; more means it ignores flow control. */
    static final int MAX_UNRECEIVED_MESSAGES = 4096;
    private static final int BATCH_GROUP = 64;

    private final DefaultRdmaTransport transport;
    private final ProviderConnection pc;
    private final Semaphore permits;
    private final AtomicInteger outstanding = new AtomicInteger();
    private final Duration timeout;
    private final long timeoutNanos; // read by every operation: Duration.toNanos() checks for overflow each time
    private final ArrayDeque<ByteBuffer> inbox = new ArrayDeque<>();
    private final ArrayDeque<CompletableFuture<ByteBuffer>> waiters = new ArrayDeque<>();
    private volatile RdmaException closedCause;
    private final RequestHandlers handlers;
    private final Peer peer;
    private final AtomicLong lastCorrelationId = new AtomicLong();
    /** Requests sent and not yet answered; whoever removes one settles it. */
    private final Map<Long, PendingRequest> pending = new ConcurrentHashMap<>();
    /** The peer's requests this side's handlers have not answered yet. */
    private final AtomicInteger serving = new AtomicInteger();

    DefaultConnection(DefaultRdmaTransport transport, ProviderConnection pc, RequestHandlers handlers) {
        this.transport = transport;
        this.pc = pc;
        this.handlers = handlers;
        this.peer = new Peer(pc.remoteAddress(), transport.provider(), Optional.empty());
        this.permits = new Semaphore(transport.config().maxOutstandingOperations());
        this.timeout = transport.config().operationTimeout();
        this.timeoutNanos = timeout.toNanos();
    }

    // ---- one-sided ----

    @Override
    public CompletableFuture<Void> read(RegionDescriptor remote, long remoteOffset, MemorySegment sink) {
        return readAll(List.of(new ReadRequest(remote, remoteOffset, sink)));
    }

    @Override
    public CompletableFuture<Void> readAll(List<ReadRequest> reads) {
        try {
            checkOpen();
            List<Op> ops = new ArrayList<>(reads.size());
            for (ReadRequest r : reads) {
                checkRemote(r.remote(), r.remoteOffset(), r.sink().byteSize(), Access.REMOTE_READ);
                DefaultRegion local = transport.localRegion(r.sink(), Access.LOCAL_WRITE);
                split(ops, r.remote(), r.remoteOffset(), r.sink(), local);
            }
            List<CompletableFuture<Void>> results = new ArrayList<>(ops.size());
            for (int from = 0; from < ops.size(); from += BATCH_GROUP) {
                List<Op> group = ops.subList(from, Math.min(ops.size(), from + BATCH_GROUP));
                results.addAll(startGroup(OperationType.READ, group));
            }
            return allOf(results);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public void readAndWait(RegionDescriptor remote, long remoteOffset, MemorySegment sink) {
        checkOpen();
        checkRemote(remote, remoteOffset, sink.byteSize(), Access.REMOTE_READ);
        DefaultRegion local = transport.localRegion(sink, Access.LOCAL_WRITE);
        if (sink.byteSize() > transport.maxOperationLength()) {
            // split into several operations: the asynchronous path knows how
            awaitResult(read(remote, remoteOffset, sink));
            return;
        }
        Tracker t = begin(OperationType.READ, sink.byteSize(), local);
        CompletableFuture<Void> op;
        try {
            op = pc.read(remote.address() + remoteOffset, remote.key(), sink, local.providerRegion());
        } catch (RuntimeException e) {
            op = CompletableFuture.failedFuture(e);
        }
        if (!pc.await(op, t.startNanos + timeoutNanos)) {
            t.onTimeout();
            // The provider fails the operation once the connection is closed; only then is the sink free.
            pc.await(op, System.nanoTime() + Long.MAX_VALUE / 2);
        }
        Throwable cause = t.settle(op.isCompletedExceptionally() ? op.exceptionNow() : null);
        if (cause != null) {
            throw rethrowable(cause);
        }
    }

    /** Waits for a user-facing future without giving up on interrupts; throws what it failed with. */
    private static void awaitResult(CompletableFuture<Void> f) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    f.get();
                    return;
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (java.util.concurrent.ExecutionException e) {
                    throw rethrowable(unwrap(e.getCause()));
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static RuntimeException rethrowable(Throwable cause) {
        return cause instanceof RuntimeException r ? r : new RdmaException(cause.getMessage(), cause);
    }

    @Override
    public CompletableFuture<Void> write(RegionDescriptor remote, long remoteOffset, MemorySegment source) {
        try {
            checkOpen();
            checkRemote(remote, remoteOffset, source.byteSize(), Access.REMOTE_WRITE);
            DefaultRegion local = transport.localRegion(source, null);
            List<Op> ops = new ArrayList<>();
            split(ops, remote, remoteOffset, source, local);
            List<CompletableFuture<Void>> results = new ArrayList<>(ops.size());
            for (Op op : ops) {
                results.add(start(OperationType.WRITE, op.local.byteSize(), op.region,
                        () -> pc.write(op.remoteAddress, op.key, op.local, op.region.providerRegion())));
            }
            return allOf(results);
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
                    () -> pc.read(op.remoteAddress, op.key, op.local, op.region.providerRegion())));
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
        CompletableFuture<Void> result = new CompletableFuture<>();
        int n = trackers.size();
        Throwable[] failures = new Throwable[n];
        AtomicInteger remaining = new AtomicInteger(n);
        var timer = transport.timers().schedule(() -> {
            long bytes = 0; // summed only for the message: most groups never time out
            for (Tracker t : trackers) {
                bytes += t.bytes;
            }
            RdmaTimeoutException timedOut = new RdmaTimeoutException(n + " " + type.tagValue() + "s of " + bytes
                    + " bytes did not all complete within " + timeout + "; closing " + this + " (peer unresponsive)");
            for (Tracker t : trackers) {
                t.timedOut = timedOut;
            }
            closeWith(timedOut);
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
                Throwable first = failure;
                transport.completions().execute(() -> {
                    if (first == null) {
                        result.complete(null);
                    } else {
                        result.completeExceptionally(first);
                    }
                });
            });
        }
        return result;
    }

    private CompletableFuture<Void> start(OperationType type, long bytes, DefaultRegion region,
                                          Supplier<CompletableFuture<Void>> action) {
        Tracker t = begin(type, bytes, region);
        CompletableFuture<Void> providerFuture;
        try {
            providerFuture = action.get();
        } catch (RuntimeException e) {
            providerFuture = CompletableFuture.failedFuture(e);
        }
        return t.follow(providerFuture);
    }

    /** Takes a back-pressure permit and pins the local region; the tracker gives both back. */
    private Tracker begin(OperationType type, long bytes, DefaultRegion region) {
        acquirePermit();
        if (region != null && !region.pin()) {
            permits.release();
            throw new IllegalStateException("the local region was closed");
        }
        outstanding.incrementAndGet();
        transport.metrics().operationStarted();
        return new Tracker(type, bytes, region);
    }

    private void acquirePermit() {
        boolean acquired;
        try {
            acquired = permits.tryAcquire(timeoutNanos, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RdmaException("interrupted while waiting for an operation slot", e);
        }
        if (!acquired) {
            throw new RdmaTimeoutException("no operation slot freed within " + timeout + " ("
                    + transport.config().maxOutstandingOperations() + " operations outstanding on " + this + ")");
        }
        RdmaException cause = closedCause;
        if (cause != null) {
            permits.release();
            throw closed(cause);
        }
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

        CompletableFuture<Void> follow(CompletableFuture<Void> providerFuture) {
            CompletableFuture<Void> result = new CompletableFuture<>();
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
                    + timeout + "; closing " + DefaultConnection.this + " (peer unresponsive)");
            // Closing makes the provider fail the operation; we report the timeout only once the provider
            // has let go of the buffer, so nothing lands in it after the caller sees the failure.
            closeWith(timedOut);
        }

        void finish(Void v, Throwable error) {
            Throwable failure = settle(error);
            if (result == null) {
                return; // never followed: the caller that began it rethrows the failure itself
            }
            transport.completions().execute(() -> {
                if (failure == null) {
                    result.complete(null);
                } else {
                    result.completeExceptionally(failure);
                }
            });
        }

        /** Gives the slot and the pin back, records metrics; the cause the user sees, or null. */
        Throwable settle(Throwable error) {
            // Decrement before releasing the slot, so outstandingOperations() never exceeds the limit.
            outstanding.decrementAndGet();
            permits.release();
            if (region != null) {
                region.unpin();
            }
            Throwable cause = error == null ? null : unwrap(error);
            if (cause != null && timedOut != null) {
                cause = timedOut;
            }
            if (cause instanceof RemoteAccessException rejected) {
                // On an RDMA NIC a remote access error moves the queue pair to the error state; every
                // provider behaves the same, so callers handle one semantics: reconnect after a rejection.
                closeWith(new ConnectionClosedException("peer rejected a " + type.tagValue() + " (" + rejected.reason()
                        + "); the connection is closed, as an RDMA queue pair would be", rejected));
            }
            transport.metrics().operationFinished(type, bytes, System.nanoTime() - startNanos, cause == null);
            return cause;
        }
    }

    private static Throwable unwrap(Throwable t) {
        while (t instanceof CompletionException && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    private static CompletableFuture<Void> allOf(List<CompletableFuture<Void>> futures) {
        if (futures.size() == 1) {
            return futures.getFirst();
        }
        CompletableFuture<Void> all = CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new));
        // Fail with the first failure itself, not a CompletionException wrapper.
        return all.handle((v, error) -> {
            if (error != null) {
                for (CompletableFuture<Void> f : futures) {
                    if (f.isCompletedExceptionally()) {
                        throw new CompletionException(unwrap(f.exceptionNow()));
                    }
                }
                throw new CompletionException(unwrap(error));
            }
            return null;
        });
    }

    private record Op(long remoteAddress, long key, MemorySegment local, DefaultRegion region) {
    }

    // ---- two-sided ----

    @Override
    public CompletableFuture<Void> send(ByteBuffer message) {
        try {
            checkOpen();
            int size = message.remaining();
            if (size > transport.config().maxMessageSize()) {
                throw new IllegalArgumentException("message of " + size + " bytes exceeds max-message-size "
                        + transport.config().maxMessageSize());
            }
            return sendFramed(MessageHeader.frame(MessageHeader.MESSAGE, 0, 0, 0, message), size);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private CompletableFuture<Void> sendFramed(ByteBuffer framed, int bodySize) {
        try {
            checkOpen();
            return start(OperationType.SEND, bodySize, null, () -> pc.send(framed));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public CompletableFuture<ByteBuffer> receive() {
        synchronized (inbox) {
            ByteBuffer next = inbox.pollFirst();
            if (next != null) {
                return CompletableFuture.completedFuture(next);
            }
            if (closedCause != null) {
                return CompletableFuture.failedFuture(closed(closedCause));
            }
            CompletableFuture<ByteBuffer> waiter = new CompletableFuture<>();
            waiters.addLast(waiter);
            return waiter;
        }
    }

    @Override
    public void onMessage(ByteBuffer message) {
        MessageHeader header;
        try {
            header = MessageHeader.parse(message);
        } catch (ProtocolException e) {
            refuse(e);
            return;
        }
        ByteBuffer body = message.slice();
        transport.metrics().recordCompleted(OperationType.RECEIVE, body.remaining(), 0, true);
        switch (header.kind()) {
            case MessageHeader.REQUEST -> serve(header, body);
            case MessageHeader.REPLY -> replied(header, body);
            default -> deliver(body);
        }
    }

    /** The peer broke the message protocol: count it, say so, and close as for any protocol violation. */
    private void refuse(ProtocolException violation) {
        transport.metrics().recordRejected();
        LOG.log(System.Logger.Level.WARNING, "closing " + this + ": " + violation.getMessage());
        closeWith(violation);
    }

    private void deliver(ByteBuffer message) {
        CompletableFuture<ByteBuffer> waiter;
        synchronized (inbox) {
            waiter = waiters.pollFirst();
            if (waiter == null) {
                if (inbox.size() >= MAX_UNRECEIVED_MESSAGES) {
                    waiter = null;
                } else {
                    inbox.addLast(message.asReadOnlyBuffer());
                    return;
                }
            }
        }
        if (waiter == null) {
            closeWith(new RdmaException("peer sent more than " + MAX_UNRECEIVED_MESSAGES
                    + " messages that were not received; closing " + this));
            return;
        }
        CompletableFuture<ByteBuffer> w = waiter;
        ByteBuffer m = message.asReadOnlyBuffer();
        transport.completions().execute(() -> w.complete(m));
    }

    @Override
    public void onClosed(Throwable cause) {
        RdmaException reason = cause instanceof RdmaException r ? r
                : new ConnectionClosedException("connection to " + pc.remoteAddress() + " failed", cause);
        List<CompletableFuture<ByteBuffer>> toFail;
        List<PendingRequest> unanswered = new ArrayList<>();
        synchronized (inbox) {
            if (closedCause == null) {
                closedCause = reason;
            }
            toFail = new ArrayList<>(waiters);
            waiters.clear();
            for (Long id : List.copyOf(pending.keySet())) {
                PendingRequest p = pending.remove(id);
                if (p != null) {
                    unanswered.add(p);
                }
            }
        }
        RdmaException failure = closed(closedCause);
        for (CompletableFuture<ByteBuffer> w : toFail) {
            transport.completions().execute(() -> w.completeExceptionally(failure));
        }
        for (PendingRequest p : unanswered) {
            p.settle(null, failure);
        }
        transport.connectionClosed(this);
    }

    private static RdmaException closed(RdmaException cause) {
        return cause instanceof ConnectionClosedException || cause instanceof RdmaTimeoutException ? cause
                : new ConnectionClosedException("connection closed: " + cause.getMessage(), cause);
    }

    // ---- requests and replies ----

    @Override
    public CompletableFuture<ByteBuffer> request(int type, ByteBuffer body) {
        try {
            checkOpen();
            int size = body.remaining();
            int max = transport.config().maxMessageSize();
            if (size > max) {
                throw new IllegalArgumentException("request body of " + size + " bytes exceeds max-message-size " + max
                        + "; send less per request or raise max-message-size on both peers");
            }
            long id = lastCorrelationId.incrementAndGet();
            ByteBuffer framed = MessageHeader.frame(MessageHeader.REQUEST, 0, type, id, body);
            acquirePermit();
            outstanding.incrementAndGet();
            transport.metrics().operationStarted();
            PendingRequest p = new PendingRequest(id, type, size);
            p.timer = transport.timers().schedule(p::onTimeout, timeoutNanos, TimeUnit.NANOSECONDS);
            RdmaException closedBefore;
            synchronized (inbox) {
                closedBefore = closedCause;
                if (closedBefore == null) {
                    pending.put(id, p);
                }
            }
            if (closedBefore != null) {
                p.settle(null, closed(closedBefore));
                return p.result;
            }
            CompletableFuture<Void> sent;
            try {
                sent = pc.send(framed);
            } catch (RuntimeException e) {
                sent = CompletableFuture.failedFuture(e);
            }
            sent.whenComplete((v, error) -> {
                if (error != null && pending.remove(id, p)) {
                    p.settle(null, unwrap(error));
                }
            });
            return p.result;
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** A request waiting for its reply: it holds an operation slot until settled, exactly once. */
    private final class PendingRequest {
        private final long id;
        private final int type;
        private final int bytes;
        private final long startNanos = System.nanoTime();
        private final CompletableFuture<ByteBuffer> result = new CompletableFuture<>();
        private volatile ScheduledFuture<?> timer;
        private volatile RdmaTimeoutException timedOut;

        PendingRequest(long id, int type, int bytes) {
            this.id = id;
            this.type = type;
            this.bytes = bytes;
        }

        void onTimeout() {
            if (pending.get(id) != this) {
                return; // answered (or failed) as the timer fired
            }
            timedOut = new RdmaTimeoutException("request of type 0x" + Integer.toHexString(type) + " got no reply within "
                    + timeout + "; closing " + DefaultConnection.this + " (peer unresponsive)");
            closeWith(timedOut);
        }

        void settle(ByteBuffer reply, Throwable failure) {
            ScheduledFuture<?> t = timer;
            if (t != null) {
                t.cancel(false);
            }
            outstanding.decrementAndGet();
            permits.release();
            Throwable cause = failure != null && timedOut != null ? timedOut : failure;
            transport.metrics().operationFinished(OperationType.SEND, bytes, System.nanoTime() - startNanos, cause == null);
            transport.completions().execute(() -> {
                if (cause == null) {
                    result.complete(reply);
                } else {
                    result.completeExceptionally(cause);
                }
            });
        }
    }

    private void replied(MessageHeader header, ByteBuffer body) {
        PendingRequest p = pending.remove(header.correlationId());
        if (p == null || p.type != header.type()) {
            ProtocolException violation = new ProtocolException("peer replied to request " + header.correlationId()
                    + " of type 0x" + Integer.toHexString(header.type()) + ", which is not in flight on this connection");
            refuse(violation);
            if (p != null) {
                p.settle(null, closed(violation));
            }
            return;
        }
        if (header.status() == MessageHeader.OK) {
            p.settle(body.asReadOnlyBuffer(), null);
            return;
        }
        RemoteRequestException.Status status = header.errorStatus();
        String reason = StandardCharsets.UTF_8.decode(body).toString();
        p.settle(null, new RemoteRequestException(status, reason, pc.remoteAddress() + " answered the request of type 0x"
                + Integer.toHexString(p.type) + " with " + status + ": " + reason));
    }

    /** A peer's request: handed to its handler on a completion thread, never run on the provider's thread. */
    private void serve(MessageHeader header, ByteBuffer body) {
        RequestHandler handler = handlers.handler(header.type());
        if (handler == null) {
            replyLater(MessageHeader.errorReply(header.type(), header.correlationId(), RemoteRequestException.Status.UNKNOWN_TYPE,
                    "no handler for request type 0x" + Integer.toHexString(header.type()) + " at " + pc.localAddress()
                            + "; check that the peer runs the component that serves it"), 0);
            return;
        }
        int limit = transport.config().maxOutstandingOperations();
        if (serving.incrementAndGet() > limit) {
            serving.decrementAndGet();
            replyLater(MessageHeader.errorReply(header.type(), header.correlationId(), RemoteRequestException.Status.BUSY,
                    "more than " + limit + " requests of this connection are in progress; wait for replies before sending more"), 0);
            return;
        }
        ByteBuffer request = body.asReadOnlyBuffer();
        transport.completions().execute(() -> {
            CompletionStage<ByteBuffer> reply;
            try {
                reply = handler.handle(request, new RequestContext(header.type(), peer));
                if (reply == null) {
                    reply = CompletableFuture.failedFuture(new NullPointerException("the handler returned no reply stage"));
                }
            } catch (Throwable e) {
                reply = CompletableFuture.failedFuture(e);
            }
            reply.whenComplete((answer, error) -> transport.completions().execute(() -> {
                serving.decrementAndGet();
                ByteBuffer framed = replyTo(header, answer, error);
                sendFramed(framed, framed.remaining() - MessageHeader.SIZE).whenComplete((v, sendFailure) -> {
                    if (sendFailure != null) {
                        LOG.log(System.Logger.Level.DEBUG, "reply to " + peer.address() + " not sent: " + sendFailure);
                    }
                });
            }));
        });
    }

    private void replyLater(ByteBuffer framed, int bodySize) {
        transport.completions().execute(() -> sendFramed(framed, bodySize));
    }

    /** The framed reply to a handler's outcome; failures become error replies that reveal no internals. */
    private ByteBuffer replyTo(MessageHeader request, ByteBuffer answer, Throwable error) {
        int type = request.type();
        long id = request.correlationId();
        String what = "request of type 0x" + Integer.toHexString(type) + " from " + peer.address();
        if (error != null) {
            Throwable cause = unwrap(error);
            if (cause instanceof RequestRefusedException || cause instanceof ProtocolException) {
                return MessageHeader.errorReply(type, id, RemoteRequestException.Status.REFUSED, String.valueOf(cause.getMessage()));
            }
            LOG.log(System.Logger.Level.WARNING, "the handler of a " + what + " failed", cause);
            return MessageHeader.errorReply(type, id, RemoteRequestException.Status.HANDLER_FAILED, "the handler failed ("
                    + cause.getClass().getSimpleName() + "); its details are in the serving side's log");
        }
        if (answer == null) {
            LOG.log(System.Logger.Level.WARNING, "the handler of a " + what + " completed with no reply");
            return MessageHeader.errorReply(type, id, RemoteRequestException.Status.HANDLER_FAILED,
                    "the handler completed with no reply; its details are in the serving side's log");
        }
        int max = transport.config().maxMessageSize();
        if (answer.remaining() > max) {
            LOG.log(System.Logger.Level.WARNING, "the reply of " + answer.remaining() + " bytes to a " + what
                    + " exceeds max-message-size " + max);
            return MessageHeader.errorReply(type, id, RemoteRequestException.Status.TOO_LARGE, "the reply of "
                    + answer.remaining() + " bytes exceeds the serving side's max-message-size " + max);
        }
        return MessageHeader.frame(MessageHeader.REPLY, MessageHeader.OK, type, id, answer);
    }

    // ---- lifecycle ----

    private void checkOpen() {
        RdmaException cause = closedCause;
        if (cause != null) {
            throw closed(cause);
        }
    }

    private void closeWith(RdmaException cause) {
        synchronized (inbox) {
            if (closedCause == null) {
                closedCause = cause;
            }
        }
        pc.close();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return pc.remoteAddress();
    }

    @Override
    public InetSocketAddress localAddress() {
        return pc.localAddress();
    }

    @Override
    public String provider() {
        return transport.provider();
    }

    @Override
    public boolean isOpen() {
        return closedCause == null;
    }

    @Override
    public int outstandingOperations() {
        return outstanding.get();
    }

    @Override
    public void close() {
        closeWith(new ConnectionClosedException("connection to " + pc.remoteAddress() + " was closed locally"));
    }

    @Override
    public String toString() {
        return "RdmaConnection[" + transport.provider() + " " + pc.localAddress() + " -> " + pc.remoteAddress() + "]";
    }
}
