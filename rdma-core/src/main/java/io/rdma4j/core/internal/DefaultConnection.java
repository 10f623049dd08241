package io.rdma4j.core.internal;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.Peer;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTimeoutException;
import io.rdma4j.core.ReadRequest;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.core.spi.ConnectionEvents;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderPoller;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * The provider-independent connection: it owns the close and coordinates the parts that share the operation slots.
 * One-sided operations, and the tracking every operation goes through, are {@link TrackedOperations}; every
 * message carries a {@link MessageHeader} and goes to the {@link MessageInbox}, the {@link PendingRequests}
 * awaiting replies, or the {@link RequestDispatcher} serving the peer's requests.
 *
 * <p>The close lock guards the transition to closed, so no receiver or request starts waiting after the
 * close has failed the waiting ones. A request holds an operation slot until replied, so a peer that runs
 * the same rdma4j with the same limit never gets a BUSY reply.
 */
final class DefaultConnection implements RdmaConnection, ConnectionEvents {

    private static final System.Logger LOG = System.getLogger(DefaultConnection.class.getName());

    private final DefaultRdmaTransport transport;
    private final ProviderConnection pc;
    private final OperationSlots slots;
    private final Object closeLock = new Object();
    /** Written under the close lock; the first cause wins. */
    private volatile RdmaException closedCause;
    private final MessageInbox inbox;
    private final LentReceiveBuffers receiveBuffers = new LentReceiveBuffers(this);
    private final PendingRequests requests;
    private final RequestDispatcher dispatcher;
    private final TrackedOperations operations;

    DefaultConnection(DefaultRdmaTransport transport, ProviderConnection pc, RequestHandlers handlers) {
        this.transport = transport;
        this.pc = pc;
        Duration timeout = transport.config().operationTimeout();
        Supplier<RdmaException> closedFailure = () -> {
            RdmaException cause = closedCause;
            return cause == null ? null : closed(cause);
        };
        this.slots = new OperationSlots(transport.config().maxOutstandingOperations(), timeout, transport.metrics(),
                closedFailure, this, pc::flushSends);
        this.inbox = new MessageInbox(closeLock, closedFailure, transport.completions(), transport.unreceivedMessageBytes(),
                pc::messageTaken);
        this.requests = new PendingRequests(this, pc, transport, slots, closeLock, closedFailure);
        Peer peer = new Peer(pc.remoteAddress(), transport.provider(), pc.peerPrincipal());
        this.dispatcher = new RequestDispatcher(this, pc, transport, handlers, peer);
        this.operations = new TrackedOperations(this, transport, pc, slots);
    }

    // ---- one-sided ----

    @Override
    public CompletableFuture<Void> read(RegionDescriptor remote, long remoteOffset, MemorySegment sink) {
        return operations.read(remote, remoteOffset, sink);
    }

    @Override
    public CompletableFuture<Void> readAll(List<ReadRequest> reads) {
        return operations.readAll(reads);
    }

    @Override
    public void readAndWait(RegionDescriptor remote, long remoteOffset, MemorySegment sink) {
        operations.readAndWait(remote, remoteOffset, sink);
    }

    @Override
    public CompletableFuture<Void> write(RegionDescriptor remote, long remoteOffset, MemorySegment source) {
        return operations.write(remote, remoteOffset, source);
    }

    /** Reads this connection on {@code poller}'s thread; false where the provider cannot. */
    boolean attachTo(ProviderPoller poller) {
        return closedCause == null && poller.attach(pc);
    }

    void detachFrom(ProviderPoller poller) {
        poller.detach(pc);
    }

    // ---- two-sided ----

    @Override
    public CompletableFuture<Void> send(ByteBuffer message) {
        return send(message, (java.util.concurrent.Executor) null);
    }

    /** {@code executor}: where the future is completed; null for the completion threads. */
    @Override
    public CompletableFuture<Void> send(ByteBuffer message, java.util.concurrent.Executor executor) {
        try {
            int size = checkSendable(message);
            ByteBuffer framed = MessageHeader.frame(MessageHeader.MESSAGE, 0, 0, 0, message);
            return operations.start(OperationType.SEND, size, null, () -> pc.send(framed), true, executor);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public CompletableFuture<Void> sendInPlace(ByteBuffer message, java.util.concurrent.Executor executor) {
        return sendInPlace(message, executor, false);
    }

    @Override
    public CompletableFuture<Void> sendInPlace(ByteBuffer message, java.util.concurrent.Executor executor, boolean more) {
        try {
            int size = checkSendable(message);
            ByteBuffer header = MessageHeader.header(MessageHeader.MESSAGE, 0, 0, 0);
            ByteBuffer body = message.slice(); // the caller's position and limit stay the caller's
            return operations.start(OperationType.SEND, size, null, () -> pc.send(header, body, more), true, executor);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public void flushSends() {
        pc.flushSends();
    }

    @Override
    public boolean sendsInPlace() {
        return pc.sendsInPlace();
    }

    /** The message's size, once the connection is open and the size within max-message-size. */
    private int checkSendable(ByteBuffer message) {
        checkOpen();
        int size = message.remaining();
        if (size > transport.config().maxMessageSize()) {
            throw new IllegalArgumentException("message of " + size + " bytes exceeds max-message-size "
                    + transport.config().maxMessageSize());
        }
        return size;
    }

    /**
     * Sends a message already framed by {@link MessageHeader}; it holds an operation slot until sent. Unless
     * {@code usersFuture}, the future is this package's own (no user callback hangs on it), so it completes on
     * whichever thread the send finished.
     */
    CompletableFuture<Void> sendFramed(ByteBuffer framed, int bodySize, boolean usersFuture) {
        try {
            checkOpen();
            return operations.start(OperationType.SEND, bodySize, null, () -> pc.send(framed), usersFuture);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public CompletableFuture<ByteBuffer> receive() {
        return inbox.receive(null);
    }

    @Override
    public CompletableFuture<ByteBuffer> receive(java.util.concurrent.Executor executor) {
        return inbox.receive(java.util.Objects.requireNonNull(executor, "executor"));
    }

    @Override
    public void onMessage(ByteBuffer message) {
        MessageHeader header;
        try {
            header = MessageHeader.parse(message);
        } catch (ProtocolException e) {
            receiveBuffers.release(message);
            refuse(e);
            return;
        }
        // a lent buffer reaches the application as itself, positioned at the body, so it knows its buffer
        boolean lent = receiveBuffers.isLent(message);
        ByteBuffer body = lent ? message : message.slice();
        transport.metrics().recordCompleted(OperationType.RECEIVE, body.remaining(), 0, true);
        switch (header.kind()) {
            case MessageHeader.REQUEST -> dispatcher.serve(header, receiveBuffers.own(body));
            case MessageHeader.REPLY -> requests.replied(header, receiveBuffers.own(body));
            default -> {
                if (!inbox.offer(body, lent)) {
                    receiveBuffers.release(body);
                    closeWith(new RdmaException("peer sent more than " + MessageInbox.MAX_UNRECEIVED_MESSAGES
                            + " messages that were not received; closing " + this));
                }
            }
        }
    }

    @Override
    public void useReceiveBuffers(io.rdma4j.core.ReceiveBuffers buffers) {
        receiveBuffers.lend(buffers);
    }

    @Override
    public ByteBuffer messageBuffer(int size) {
        return receiveBuffers.allocate(size);
    }

    @Override
    public void messageDropped(ByteBuffer buffer) {
        receiveBuffers.release(buffer);
    }

    @Override
    public long unreceivedMessageBytes() {
        return inbox.queuedBytes();
    }

    @Override
    public long transportUnreceivedMessageBytes() {
        return transport.unreceivedMessageBytes().get();
    }

    @Override
    public int unansweredRequests() {
        return dispatcher.unanswered();
    }

    /** The peer broke the message protocol: count it, say so, and close as for any protocol violation. */
    void refuse(ProtocolException violation) {
        transport.metrics().recordRejected(LOG, () -> "closing " + this + ": " + violation.getMessage());
        closeWith(violation);
    }

    @Override
    public void onClosed(Throwable cause) {
        RdmaException reason = cause instanceof RdmaException r ? r
                : new ConnectionClosedException("connection to " + pc.remoteAddress() + " failed", cause);
        List<MessageInbox.Waiter> receivers;
        List<PendingRequests.PendingRequest> unanswered;
        synchronized (closeLock) {
            if (closedCause == null) {
                closedCause = reason;
            }
            receivers = inbox.takeWaiters();
            unanswered = requests.takeAll();
        }
        RdmaException failure = closed(closedCause);
        inbox.fail(receivers, failure);
        requests.fail(unanswered, failure);
        transport.connectionClosed(this);
    }

    /** The exception for operations on a connection closed by {@code cause}. */
    static RdmaException closed(RdmaException cause) {
        return cause instanceof ConnectionClosedException || cause instanceof RdmaTimeoutException ? cause
                : new ConnectionClosedException("connection closed: " + cause.getMessage(), cause);
    }

    // ---- requests and replies ----

    @Override
    public CompletableFuture<ByteBuffer> request(int type, ByteBuffer body) {
        return requests.request(type, body);
    }

    // ---- lifecycle ----

    void checkOpen() {
        RdmaException cause = closedCause;
        if (cause != null) {
            throw closed(cause);
        }
    }

    /** Closes with {@code cause} unless closed already; operations fail with it from now on. */
    void closeWith(RdmaException cause) {
        synchronized (closeLock) {
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
        return slots.outstanding();
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
