package io.rdma4j.core.verbs;

import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ConnectionEvents;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.nativeloader.RdmaCm;
import io.rdma4j.nativeloader.SendQueue;
import io.rdma4j.nativeloader.Verbs;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One RC connection made through rdma_cm: its connection-manager state machine and the dispatch of its send
 * completions. What it owns natively is in {@link QueuePairResources}, its RDMA READs and WRITEs in
 * {@link OneSidedRequests}, its two-sided messages and credits in {@link MessageChannel}, what its receives bring in
 * {@link InboundMessages} (they complete on the transport's {@link ReceiveCompletions}), who polls its CQ when in
 * {@link CompletionPolling}, what the facade hears in {@link FacadeEvents}.
 *
 * <p>States: CONNECTING (active side, until ESTABLISHED) or ACCEPTING (passive side, accepted, until
 * ESTABLISHED), OPEN, CLOSING (disconnected, draining), CLOSED (torn down). Callers post under {@link #lock};
 * only the progress thread tears down an attached connection, under the poll lock.
 */
final class VerbsConnection implements ProviderConnection, CompletionPolling.Handler, InboundMessages.Owner {

    private static final System.Logger LOG = System.getLogger(VerbsConnection.class.getName());
    private static final long CLOSE_DRAIN_NANOS = TimeUnit.SECONDS.toNanos(1);

    private enum State { CONNECTING, ACCEPTING, OPEN, CLOSING, CLOSED }

    private final VerbsTransport transport;
    private final MemorySegment id;
    private final ReentrantLock lock = new ReentrantLock();
    private final CompletionPolling polling;
    private volatile BlockingQueue<RdmaCm.Event> setupEvents;
    private Runnable onEstablished;
    private final ProofExchange proof;
    private QueuePairResources resources;

    // guarded by lock; read without it by the progress thread, which only asks whether to poll
    private volatile State state = State.CONNECTING;
    private final PostedRequests posted = new PostedRequests();
    private final OneSidedRequests oneSided = new OneSidedRequests(lock, this::closedUnlessOpen, posted);
    private MessageChannel messages;
    private InboundMessages inbound;
    private RdmaException closeCause;
    private long closeDeadline;
    private final FacadeEvents facade = new FacadeEvents(lock);

    private InetSocketAddress remote;
    private InetSocketAddress local;

    VerbsConnection(VerbsTransport transport, MemorySegment id, boolean connecting) {
        this.transport = transport;
        this.id = id;
        this.proof = new ProofExchange(transport.config.sharedSecretValue(), connecting);
        this.polling = new CompletionPolling(transport.options.awaitSpinNanos(), this, transport.receiveCompletions::tryPoll);
    }

    void setupEvents(BlockingQueue<RdmaCm.Event> queue) {
        this.setupEvents = queue;
    }

    // ---- setup ----

    /**
     * CQ and QP on the transport's shared receive queue, where this connection's reserved receives are posted before
     * it can be established.
     */
    void createResources() {
        QueuePairResources r = QueuePairResources.create(transport, id, this);
        lock.lock();
        try {
            resources = r;
            oneSided.attach(r.sendQueue);
            messages = new MessageChannel(transport.staging.sendingOn(r.sendQueue), transport.receives.shared(), posted,
                    transport.options.receiveDepth(), transport.config.maxMessageSize());
            inbound = new InboundMessages(lock, transport.receives, transport.device.iwarp, messages, proof, facade, this,
                    () -> String.valueOf(remote));
        } finally {
            lock.unlock();
        }
        polling.attach(r.completions);
    }

    RdmaCm.ConnectionParameters connectionParameters(int responderResources, int initiatorDepth) {
        return ConnectData.connectionParameters(transport.config.maxMessageSize(), transport.options.receiveDepth(),
                proof.ownNonce(), responderResources, initiatorDepth);
    }

    /** Under lock: the peer's private data read, the addresses known. */
    private void peer(ConnectData.PeerParameters peer) {
        messages.open(peer);
        remote = RdmaCm.peerAddress(id);
        local = RdmaCm.localAddress(id);
    }

    /** Active side: ESTABLISHED arrived with the peer's accept private data. */
    void established(byte[] privateData) {
        ConnectData.PeerParameters peer = ConnectData.peer(privateData);
        lock.lock();
        try {
            AuthenticationException mismatch = proof.mismatch(peer, String.valueOf(RdmaCm.peerAddress(id)));
            if (mismatch != null) {
                RdmaCm.disconnect(id);
                throw mismatch;
            }
            peer(peer);
            state = State.OPEN;
            setupEvents = null;
        } finally {
            lock.unlock();
        }
        inbound.opened();
    }

    /**
     * Passive side, on the CM thread: create the QP and accept; {@code whenEstablished} runs on ESTABLISHED, and
     * {@code handOver} then or once the peer proved the shared secret ({@link ProofExchange#established}).
     */
    void accept(RdmaCm.Event request, Runnable whenEstablished, Runnable handOver) {
        ConnectData.PeerParameters peer = ConnectData.peer(request.privateData());
        createResources();
        lock.lock();
        try {
            peer(peer);
            proof.accepting(peer, String.valueOf(remote), handOver);
            state = State.ACCEPTING;
            onEstablished = whenEstablished;
        } finally {
            lock.unlock();
        }
        inbound.opened();
        int readDepth = transport.device.readDepth;
        int responder = Math.min(readDepth, Math.max(1, request.initiatorDepth()));
        int initiator = Math.min(readDepth, Math.max(1, request.responderResources()));
        RdmaCm.accept(id, connectionParameters(responder, initiator));
    }

    /** On the CM thread. */
    void onCmEvent(RdmaCm.Event e) {
        BlockingQueue<RdmaCm.Event> q = setupEvents;
        if (q != null) {
            q.add(e);
            return;
        }
        int type = e.type();
        Runnable attach = null;
        RdmaException refusedWhileAccepting = null;
        boolean unattached = false;
        lock.lock();
        try {
            if (state == State.ACCEPTING && type == RdmaCm.ESTABLISHED) {
                state = State.OPEN;
                attach = onEstablished;
                onEstablished = null;
                // the queue pair received before this event: a peer refused then is closed now that it is attached
                refusedWhileAccepting = closeCause;
            } else {
                unattached = state == State.ACCEPTING;
            }
        } finally {
            lock.unlock();
        }
        if (attach != null) {
            attach.run();
            if (refusedWhileAccepting != null) {
                beginClose(refusedWhileAccepting);
                return;
            }
            proof.established(transport.config.connectTimeout(), String.valueOf(remote), this::refuse);
            return;
        }
        if (RdmaCm.endsConnection(type)) {
            if (unattached) {
                transport.settingUpEnded(this);
                destroyUnattached();
            } else {
                beginClose(new ConnectionClosedException("connection to " + remote + " ended: " + e.describe()
                        + (type == RdmaCm.DISCONNECTED ? " (the peer closed it or died)" : "")));
            }
        }
    }

    // ---- operations ----

    @Override
    public void start(ConnectionEvents events) {
        facade.start(events, () -> state == State.CLOSED ? new FacadeEvents.ClosedAlready(closeCause) : null);
    }

    @Override
    public CompletableFuture<Void> read(long remoteAddress, long remoteKey, MemorySegment sink, ProviderRegion localRegion) {
        return oneSided.single(SendQueue.RDMA_READ, "read", remoteAddress, remoteKey, sink, localRegion);
    }

    @Override
    public List<CompletableFuture<Void>> readAll(List<ProviderRead> reads) {
        return oneSided.readAll(reads);
    }

    @Override
    public CompletableFuture<Void> write(long remoteAddress, long remoteKey, MemorySegment source, ProviderRegion localRegion) {
        return oneSided.single(SendQueue.RDMA_WRITE, "write", remoteAddress, remoteKey, source, localRegion);
    }

    @Override
    public CompletableFuture<Void> send(ByteBuffer message) {
        CompletableFuture<Void> f = new CompletableFuture<>();
        lock.lock();
        try {
            if (state != State.OPEN) {
                f.completeExceptionally(closedException());
                return f;
            }
            messages.send(message, f);
        } finally {
            lock.unlock();
        }
        return f;
    }

    // ---- completions ----

    /** Who polls this connection's CQ: the progress thread arms it and asks whether callers poll it. */
    CompletionPolling polling() {
        return polling;
    }

    /**
     * Progress thread: polls this connection's CQ once and tears down when closing and drained. Returns
     * the completions found, or {@link CompletionPolling#CALLER_POLLING} when a waiting caller holds the CQ.
     */
    int progress() {
        return polling.progress(this::finishIfDrained);
    }

    /** Whether its CQ may have something for the progress thread: sends are posted, or it is closing. */
    boolean awaitsCompletions() {
        return posted.anyPosted() || state == State.CLOSING;
    }

    /**
     * The caller polls the CQ itself for up to {@code verbs.await-spin-micros}, as perftest does, then
     * blocks on the future and leaves the polling to the progress thread.
     */
    @Override
    public boolean await(CompletableFuture<?> operation, long deadlineNanos) {
        if (polling.spin(operation, deadlineNanos)) {
            return true;
        }
        try {
            return ProviderConnection.super.await(operation, deadlineNanos);
        } finally {
            polling.unblocked();
        }
    }

    /** A completion on this connection's own CQ: its sends complete there, its receives on the shared one. */
    @Override
    public void onCompletion(long wrId, int status, int byteLength) {
        onSendCompletion(wrId, status);
    }

    @Override
    public void onPollFailure(int result) {
        beginClose(new ConnectionClosedException("ibv_poll_cq failed (" + result + ") on " + this));
    }

    private void onSendCompletion(long wrId, int status) {
        // Usually one request completes; unsignalled ones of a chain posted before it complete with it.
        PostedRequests.Completed done;
        lock.lock();
        try {
            done = posted.completeUpTo(wrId, messages::slotFreed);
            if (status == WorkCompletions.SUCCESS && state == State.OPEN) {
                messages.flush();
            }
        } finally {
            lock.unlock();
        }
        if (status != WorkCompletions.SUCCESS) {
            // the QP is in the error state: closed for the facade before the failure is seen
            beginClose(new ConnectionClosedException("the queue pair to " + remote + " failed ("
                    + Verbs.completionStatus(status) + "); the connection is closed"));
            reportClosed();
        }
        done.complete(status, String.valueOf(remote));
    }

    /** A receive of this connection's queue pair completed on the shared receive CQ ({@link ReceiveCompletions}). */
    void onReceive(long wrId, int status, int byteLength) {
        inbound.onReceive(wrId, status, byteLength);
    }

    /**
     * The peer broke the verbs message protocol, or failed authentication (counted as a refused peer): only this
     * connection closes.
     */
    @Override
    public void refuse(RdmaException violation) {
        if (violation instanceof AuthenticationException) {
            transport.rejected("closing " + this + ": " + violation.getMessage());
        } else {
            LOG.log(System.Logger.Level.WARNING, "closing " + this + ": " + violation.getMessage());
        }
        beginClose(violation);
    }

    /**
     * Active side, attached: proves the shared secret and waits until {@code deadlineNanos} for the listener's proof.
     * On failure the connection is closed and the failure thrown, an {@link AuthenticationException}.
     */
    void authenticate(long deadlineNanos) {
        AuthenticationException failure = proof.prove(lock, messages, deadlineNanos, String.valueOf(remote));
        if (failure != null) {
            beginClose(failure);
            throw failure;
        }
    }

    /**
     * Progress thread: closes the connection when its queue pair is in the error state though no completion or event
     * said so (Soft-RoCE before Linux 6.2 reports none for a queue pair on a shared receive queue that failed as the
     * responder of a READ).
     */
    void checkQueuePair() {
        lock.lock();
        try {
            if (state != State.OPEN) {
                return;
            }
        } finally {
            lock.unlock();
        }
        if (resources.queuePairInError()) {
            queuePairFailed("found by ibv_query_qp");
        }
    }

    /**
     * Progress thread: gives back the credits the peer lent beyond its reservation once nothing was sent for
     * {@code idleNanos}, so that the peer's other connections may use them.
     */
    void releaseIdleCredits(long now, long idleNanos) {
        lock.lock();
        try {
            if (state == State.OPEN) {
                messages.releaseIdleCredits(now, idleNanos);
            }
        } finally {
            lock.unlock();
        }
    }

    /** The device reported this connection's queue pair in the error state ({@link DeviceEvents}). */
    void queuePairFailed(String event) {
        beginClose(new ConnectionClosedException("the queue pair to " + remote + " entered the error state (" + event
                + "); the connection is closed"));
    }

    /**
     * Progress thread: handling this connection's completions threw. Only this connection closes; the progress
     * thread goes on with the others.
     */
    void failed(RuntimeException e) {
        LOG.log(System.Logger.Level.ERROR, "closing " + this + ": handling its completions failed", e);
        beginClose(e instanceof RdmaException r ? r
                : new RdmaException("handling the completions of " + this + " failed: " + e, e));
    }

    // ---- closing ----

    /** Under lock: null while open, else the exception for new operations. */
    private RdmaException closedUnlessOpen() {
        return state == State.OPEN ? null : closedException();
    }

    private RdmaException closedException() {
        RdmaException c = closeCause;
        return c instanceof ConnectionClosedException ? c
                : new ConnectionClosedException("connection to " + remote + " is closed" + (c == null ? "" : ": " + c.getMessage()), c);
    }

    @Override
    public void close() {
        beginClose(new ConnectionClosedException("connection to " + remote + " was closed locally"));
    }

    @Override
    public boolean closing() {
        return state == State.CLOSING || state == State.CLOSED;
    }

    /** Moves the QP to the error state (flushing what is posted); the progress thread then tears down. */
    @Override
    public void beginClose(RdmaException cause) {
        lock.lock();
        try {
            if (state == State.CLOSING || state == State.CLOSED) {
                return;
            }
            proof.closed(cause);
            if (state != State.OPEN) {
                // not attached yet: the setup path owns teardown
                closeCause = cause;
                return;
            }
            state = State.CLOSING;
            closeCause = cause;
            closeDeadline = System.nanoTime() + CLOSE_DRAIN_NANOS;
            // Under the lock: the progress thread destroys the id only after taking it (in finish).
            RdmaCm.disconnect(id);
        } finally {
            lock.unlock();
        }
    }

    /** Progress thread, under the poll lock: tears down once closing and drained (or past the drain deadline). */
    private void finishIfDrained() {
        boolean finish;
        lock.lock();
        try {
            finish = state == State.CLOSING && (posted.isEmpty() || System.nanoTime() - closeDeadline > 0);
        } finally {
            lock.unlock();
        }
        if (finish) {
            finish();
        }
    }

    /** Progress thread: destroys the QP first (no more DMA), then fails what is left and frees everything. */
    private void finish() {
        List<PostedRequests.Pending> left;
        List<MessageChannel.Waiting> unsent;
        lock.lock();
        try {
            state = State.CLOSED;
            left = posted.drain();
            unsent = messages.drainWaiting();
        } finally {
            lock.unlock();
        }
        transport.detach(this);
        polling.tearDown(); // the poll lock is held here (finish runs inside progress())
        releaseNative();
        left.forEach(p -> transport.staging.free(p.sendSlot())); // the queue pair is gone: nothing reads them now
        // Report the close before failing what was pending: whoever sees an operation fail as closed
        // then also sees the connection closed.
        reportClosed();
        RdmaException failure = closedException();
        for (PostedRequests.Pending p : left) {
            if (p.future() != null) {
                p.future().completeExceptionally(failure);
            }
        }
        unsent.forEach(m -> m.future().completeExceptionally(failure));
    }

    /** Tells the facade once that the connection is closed (with the first cause). */
    private void reportClosed() {
        facade.reportClosed(() -> closeCause);
    }

    /**
     * Progress thread, when the transport stops and this connection is still attached: tears down now, whatever is
     * still posted; waiting operations fail with {@link ConnectionClosedException}.
     */
    void forceFinish() {
        beginClose(new ConnectionClosedException("the transport was closed while the connection to " + remote
                + " was still open"));
        polling.exclusively(() -> {
            boolean closing;
            lock.lock();
            try {
                closing = state == State.CLOSING;
            } finally {
                lock.unlock();
            }
            if (closing) {
                finish();
            }
        });
        transport.detach(this);
    }

    /** Teardown of a connection that never reached the progress thread (setup failed or was refused). */
    void destroyUnattached() {
        polling.tearDown();
        lock.lock();
        try {
            if (state == State.CLOSED) {
                return;
            }
            state = State.CLOSED;
            if (closeCause == null) {
                closeCause = new ConnectionClosedException("connection setup did not complete");
            }
        } finally {
            lock.unlock();
        }
        releaseNative();
    }

    private void releaseNative() {
        transport.cmEvents.forget(id);
        QueuePairResources r = resources;
        if (r != null) {
            // read once the last receives were dispatched: each may give a lent credit back
            r.release(transport, () -> messages == null ? 0 : messages.lentCredits());
        }
        RdmaCm.destroyId(id);
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return remote;
    }

    @Override
    public InetSocketAddress localAddress() {
        return local;
    }

    @Override
    public String toString() {
        return "VerbsConnection[" + local + " -> " + remote + "]";
    }
}
