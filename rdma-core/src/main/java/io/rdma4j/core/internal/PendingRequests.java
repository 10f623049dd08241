package io.rdma4j.core.internal;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.core.spi.ProviderConnection;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * The requesting side of a connection's request/reply channel: requests this side sent, by correlation id,
 * until their reply, failure or timeout. Each holds one of the connection's operation slots until settled,
 * and is registered under the connection's close lock, so none is left behind by a close.
 */
final class PendingRequests {

    private final DefaultConnection connection;
    private final ProviderConnection pc;
    private final DefaultRdmaTransport transport;
    private final OperationSlots slots;
    private final Object closeLock;
    /** Under the close lock: null while the connection is open, else the exception for requests. */
    private final Supplier<RdmaException> closedFailure;
    private final Duration timeout;
    private final long timeoutNanos;
    private final AtomicLong lastCorrelationId = new AtomicLong();
    /** Requests sent and not yet answered; whoever removes one settles it. */
    private final Map<Long, PendingRequest> pending = new ConcurrentHashMap<>();

    PendingRequests(DefaultConnection connection, ProviderConnection pc, DefaultRdmaTransport transport,
                    OperationSlots slots, Object closeLock, Supplier<RdmaException> closedFailure) {
        this.connection = connection;
        this.pc = pc;
        this.transport = transport;
        this.slots = slots;
        this.closeLock = closeLock;
        this.closedFailure = closedFailure;
        this.timeout = transport.config().operationTimeout();
        this.timeoutNanos = timeout.toNanos();
    }

    CompletableFuture<ByteBuffer> request(int type, ByteBuffer body) {
        try {
            connection.checkOpen();
            int size = body.remaining();
            int max = transport.config().maxMessageSize();
            if (size > max) {
                throw new IllegalArgumentException("request body of " + size + " bytes exceeds max-message-size " + max
                        + "; send less per request or raise max-message-size on both peers");
            }
            long id = lastCorrelationId.incrementAndGet();
            ByteBuffer framed = MessageHeader.frame(MessageHeader.REQUEST, 0, type, id, body);
            slots.acquire();
            slots.occupy();
            PendingRequest p = new PendingRequest(id, type, size);
            p.timer = transport.timers().schedule(p::onTimeout, timeoutNanos, TimeUnit.NANOSECONDS);
            RdmaException closedBefore;
            synchronized (closeLock) {
                closedBefore = closedFailure.get();
                if (closedBefore == null) {
                    pending.put(id, p);
                }
            }
            if (closedBefore != null) {
                p.settle(null, closedBefore);
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
                    p.settle(null, Futures.unwrap(error));
                }
            });
            return p.result;
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** A reply from the peer: settles its request, or closes the connection if none of that id and type is pending. */
    void replied(MessageHeader header, ByteBuffer body) {
        PendingRequest p = pending.remove(header.correlationId());
        if (p == null || p.type != header.type()) {
            ProtocolException violation = new ProtocolException("peer replied to request " + header.correlationId()
                    + " of type 0x" + Integer.toHexString(header.type()) + ", which is not in flight on this connection");
            connection.refuse(violation);
            if (p != null) {
                p.settle(null, DefaultConnection.closed(violation));
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

    /** Under the close lock, once the connection is closed: the requests to fail, no longer pending. */
    List<PendingRequest> takeAll() {
        List<PendingRequest> unanswered = new ArrayList<>();
        for (Long id : List.copyOf(pending.keySet())) {
            PendingRequest p = pending.remove(id);
            if (p != null) {
                unanswered.add(p);
            }
        }
        return unanswered;
    }

    void fail(List<PendingRequest> unanswered, RdmaException failure) {
        for (PendingRequest p : unanswered) {
            p.settle(null, failure);
        }
    }

    /** A request waiting for its reply: it holds an operation slot until settled, exactly once. */
    final class PendingRequest {
        private final long id;
        private final int type;
        private final int bytes;
        private final long startNanos = System.nanoTime();
        private final OperationFuture<ByteBuffer> result = new OperationFuture<>(pc, transport.completions(), true);
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
                    + timeout + "; closing " + connection + " (peer unresponsive)");
            connection.closeWith(timedOut);
        }

        void settle(ByteBuffer reply, Throwable failure) {
            ScheduledFuture<?> t = timer;
            if (t != null) {
                t.cancel(false);
            }
            slots.free();
            Throwable cause = failure != null && timedOut != null ? timedOut : failure;
            transport.metrics().operationFinished(OperationType.SEND, bytes, System.nanoTime() - startNanos, cause == null);
            result.settle(reply, cause);
        }
    }
}
