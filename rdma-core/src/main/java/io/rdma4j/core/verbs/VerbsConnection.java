package io.rdma4j.core.verbs;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ConnectionEvents;
import io.rdma4j.core.spi.ProviderConnection;
import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.nativeloader.VerbsOps;
import io.rdma4j.nativeloader.bindings.RdmaBindings;
import io.rdma4j.nativeloader.bindings.ibv_cq;
import io.rdma4j.nativeloader.bindings.ibv_mr;
import io.rdma4j.nativeloader.bindings.ibv_qp_cap;
import io.rdma4j.nativeloader.bindings.ibv_qp_init_attr;
import io.rdma4j.nativeloader.bindings.ibv_recv_wr;
import io.rdma4j.nativeloader.bindings.ibv_send_wr;
import io.rdma4j.nativeloader.bindings.ibv_sge;
import io.rdma4j.nativeloader.bindings.ibv_wc;
import io.rdma4j.nativeloader.bindings.rdma_cm_id;
import io.rdma4j.nativeloader.bindings.rdma_conn_param;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One RC queue pair made through rdma_cm, with its own CQ (on the transport's completion channel), a ring
 * of registered receive slots and registered send staging slots. Two-sided messages use credits (the
 * peer's free receive slots, returned in every message header or in a credit-only message) so a SEND never
 * finds no receive posted: iWARP has no RNR retry and would fail the queue pair.
 *
 * <p>Threads: callers post under {@link #lock}. The CQ is polled under {@link #pollLock}, by the progress
 * thread or by a caller waiting in {@link #await} (which reaps completions itself, saving two thread
 * hand-offs); only the progress thread tears down, also under {@link #pollLock}.
 */
final class VerbsConnection implements ProviderConnection {

    private static final System.Logger LOG = System.getLogger(VerbsConnection.class.getName());

    /** Connect private data: magic+version, max message size, receive depth (data credits). */
    static final int MAGIC_V1 = 0x52344A01; // "R4J" v1
    static final int PRIVATE_DATA_LENGTH = 12;
    static final int HEADER = 8;
    private static final int FLAG_DATA = 0;
    private static final int FLAG_CREDIT = 1;
    /** Receive slots beyond the data credits, for credit-only messages (at most 2 are ever in flight). */
    static final int EXTRA_SLOTS = 4;
    private static final int BATCH = 64;
    static final int POLL_BATCH = 32;
    /** A waiting caller reads the clock once per this many polls of the CQ (see pollUntilDone). */
    private static final int CLOCK_EVERY_POLLS = 16;
    private static final long RECV_BIT = 1L << 62;
    private static final long CLOSE_DRAIN_NANOS = TimeUnit.SECONDS.toNanos(1);

    private enum State { CONNECTING, ACCEPTING, OPEN, CLOSING, CLOSED }

    private final VerbsTransport transport;
    private final MemorySegment id;
    private final Arena arena = Arena.ofShared();
    private final ReentrantLock lock = new ReentrantLock();
    /** Whoever polls the CQ holds this: the progress thread or a waiting caller, never both. */
    private final ReentrantLock pollLock = new ReentrantLock();
    /** Guarded by pollLock: the CQ is destroyed. */
    private boolean torn;
    /** Counts callers' waits in {@link #await}: callers read no clock for it (see {@link #polledByCaller}). */
    private volatile int callerWaits;
    /** The progress thread's own: the {@link #callerWaits} it last saw, and when it saw it change. */
    private int callerWaitsSeen;
    /** Callers polling this CQ in {@link #await} right now, and those blocked there after polling. */
    private final AtomicInteger spinningCallers = new AtomicInteger();
    private final AtomicInteger blockedCallers = new AtomicInteger();
    private long callerSeenAt = System.nanoTime() - TimeUnit.SECONDS.toNanos(1);
    private MemorySegment completions;
    private State state = State.CONNECTING;
    private volatile BlockingQueue<VerbsTransport.CmEvent> setupEvents;
    private Runnable onEstablished;

    // native resources (null until created)
    private MemorySegment cq;
    private MemorySegment qp;
    private VerbsOps.CompletionQueueOps cqOps;
    private VerbsOps.QueuePairOps qpOps;
    private MemorySegment recvMr;
    private MemorySegment sendMr;
    private MemorySegment recvBuf;
    private MemorySegment sendBuf;
    private MemorySegment recvWrs;
    private MemorySegment recvSges;
    private MemorySegment sendWrs;
    private MemorySegment sendSges;
    /** The single one-sided request's own work request, SGE and rdma part: their fixed fields are set once. */
    private MemorySegment singleWr;
    private MemorySegment singleSge;
    private MemorySegment singleRdma;
    private MemorySegment badWr;
    private int slotSize;
    private int recvSlots;
    private int sendLkey;

    // guarded by lock
    private final ArrayDeque<Pending> sendQueue = new ArrayDeque<>();
    private final ArrayDeque<Integer> freeSendSlots = new ArrayDeque<>();
    private final ArrayDeque<Message> waitingSends = new ArrayDeque<>();
    private int credits;
    private int owedCredits;
    private int peerMaxMessageSize;
    private long nextWrId = 1;
    private RdmaException closeCause;
    private long closeDeadline;
    private ConnectionEvents events;
    private final List<ByteBuffer> early = new ArrayList<>();
    private boolean closedReported;

    private InetSocketAddress remote;
    private InetSocketAddress local;

    private record Message(ByteBuffer payload, CompletableFuture<Void> future) {
    }

    /** A posted send-queue work request, in post order. */
    private static final class Pending {
        final long wrId;
        final String operation;
        final CompletableFuture<Void> future; // null for credit-only messages
        final int sendSlot;                   // -1 when no staging slot is used

        Pending(long wrId, String operation, CompletableFuture<Void> future, int sendSlot) {
            this.wrId = wrId;
            this.operation = operation;
            this.future = future;
            this.sendSlot = sendSlot;
        }
    }

    VerbsConnection(VerbsTransport transport, MemorySegment id) {
        this.transport = transport;
        this.id = id;
    }

    void setupEvents(BlockingQueue<VerbsTransport.CmEvent> queue) {
        this.setupEvents = queue;
    }

    // ---- setup ----

    /** CQ, QP, receive and send slots; receives are posted before the connection can be established. */
    void createResources() {
        int depth = transport.receiveDepth;
        recvSlots = depth + EXTRA_SLOTS;
        int sendSlots = depth + EXTRA_SLOTS;
        int maxSendWr = transport.config.maxOutstandingOperations() + sendSlots + 8;
        slotSize = HEADER + transport.config.maxMessageSize();
        cq = NativeCalls.requirePointer("ibv_create_cq", NativeCalls.CREATE_CQ, transport.context, maxSendWr + recvSlots,
                MemorySegment.NULL, transport.compChannel, 0).reinterpret(ibv_cq.sizeof());
        cqOps = VerbsOps.ofCompletionQueue(cq);
        MemorySegment init = ibv_qp_init_attr.allocate(arena);
        ibv_qp_init_attr.send_cq(init, cq);
        ibv_qp_init_attr.recv_cq(init, cq);
        ibv_qp_init_attr.qp_type(init, RdmaBindings.IBV_QPT_RC());
        ibv_qp_init_attr.sq_sig_all(init, 0);
        MemorySegment cap = ibv_qp_init_attr.cap(init);
        ibv_qp_cap.max_send_wr(cap, maxSendWr);
        ibv_qp_cap.max_recv_wr(cap, recvSlots);
        ibv_qp_cap.max_send_sge(cap, 1);
        ibv_qp_cap.max_recv_sge(cap, 1);
        NativeCalls.check("rdma_create_qp", NativeCalls.CREATE_QP, id, transport.pd, init);
        qp = rdma_cm_id.qp(id);
        qpOps = VerbsOps.ofQueuePair(qp);

        recvBuf = arena.allocate((long) recvSlots * slotSize, 4096);
        sendBuf = arena.allocate((long) sendSlots * slotSize, 4096);
        recvMr = registerInternal(recvBuf, VerbsAccess.IBV_ACCESS_LOCAL_WRITE);
        sendMr = registerInternal(sendBuf, 0);
        sendLkey = ibv_mr.lkey(sendMr);
        for (int i = 0; i < sendSlots; i++) {
            freeSendSlots.add(i);
        }
        recvWrs = ibv_recv_wr.allocateArray(recvSlots, arena);
        recvSges = ibv_sge.allocateArray(recvSlots, arena);
        int recvLkey = ibv_mr.lkey(recvMr);
        for (int i = 0; i < recvSlots; i++) {
            MemorySegment sge = ibv_sge.asSlice(recvSges, i);
            ibv_sge.addr(sge, recvBuf.address() + (long) i * slotSize);
            ibv_sge.length(sge, slotSize);
            ibv_sge.lkey(sge, recvLkey);
            MemorySegment wr = ibv_recv_wr.asSlice(recvWrs, i);
            ibv_recv_wr.wr_id(wr, RECV_BIT | i);
            ibv_recv_wr.next(wr, MemorySegment.NULL);
            ibv_recv_wr.sg_list(wr, sge);
            ibv_recv_wr.num_sge(wr, 1);
        }
        sendWrs = ibv_send_wr.allocateArray(BATCH, arena);
        sendSges = ibv_sge.allocateArray(BATCH, arena);
        singleWr = ibv_send_wr.allocate(arena);
        singleSge = ibv_sge.allocate(arena);
        singleRdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(singleWr));
        ibv_send_wr.next(singleWr, MemorySegment.NULL);
        ibv_send_wr.sg_list(singleWr, singleSge);
        ibv_send_wr.num_sge(singleWr, 1);
        ibv_send_wr.send_flags(singleWr, RdmaBindings.IBV_SEND_SIGNALED());
        badWr = arena.allocate(ValueLayout.ADDRESS);
        completions = ibv_wc.allocateArray(POLL_BATCH, arena);
        for (int i = 0; i < recvSlots; i++) {
            postReceive(i);
        }
    }

    private MemorySegment registerInternal(MemorySegment segment, int flags) {
        int[] errno = new int[1];
        MemorySegment mr = NativeCalls.callPointer(NativeCalls.REG_MR, errno, transport.pd, segment, segment.byteSize(), flags);
        if (mr.equals(MemorySegment.NULL)) {
            throw VerbsTransport.registrationFailure(segment.byteSize(), errno[0]);
        }
        return mr.reinterpret(ibv_mr.sizeof());
    }

    private void postReceive(int slot) {
        int rc = qpOps.postRecv(ibv_recv_wr.asSlice(recvWrs, slot), badWr);
        if (rc != 0) {
            throw new RdmaException("ibv_post_recv failed: errno " + rc);
        }
    }

    MemorySegment connParam(Arena a, int responderResources, int initiatorDepth) {
        MemorySegment pd = a.allocate(PRIVATE_DATA_LENGTH);
        ByteBuffer b = pd.asByteBuffer().order(ByteOrder.BIG_ENDIAN);
        b.putInt(MAGIC_V1).putInt(transport.config.maxMessageSize()).putInt(transport.receiveDepth);
        MemorySegment p = rdma_conn_param.allocate(a);
        rdma_conn_param.private_data(p, pd);
        rdma_conn_param.private_data_len(p, (byte) PRIVATE_DATA_LENGTH);
        rdma_conn_param.responder_resources(p, (byte) responderResources);
        rdma_conn_param.initiator_depth(p, (byte) initiatorDepth);
        rdma_conn_param.retry_count(p, (byte) 7);
        rdma_conn_param.rnr_retry_count(p, (byte) 7); // credits make RNR impossible; infinite retry is a backstop
        return p;
    }

    /** Reads the peer's private data: its max message size and receive depth. */
    private void peer(byte[] privateData) {
        if (privateData.length < PRIVATE_DATA_LENGTH) {
            throw new ProtocolException("peer sent " + privateData.length + " bytes of connection data, expected "
                    + PRIVATE_DATA_LENGTH + " (not an rdma4j verbs peer?)");
        }
        ByteBuffer b = ByteBuffer.wrap(privateData).order(ByteOrder.BIG_ENDIAN);
        int magic = b.getInt();
        if (magic != MAGIC_V1) {
            throw new ProtocolException("peer speaks protocol 0x" + Integer.toHexString(magic) + ", this side 0x"
                    + Integer.toHexString(MAGIC_V1) + ": use the same rdma4j version on both sides");
        }
        peerMaxMessageSize = b.getInt();
        int peerDepth = b.getInt();
        credits = Math.min(peerDepth, transport.receiveDepth);
        remote = VerbsTransport.peerOf(id);
        local = VerbsTransport.localOf(id);
    }

    /** Active side: ESTABLISHED arrived with the peer's accept private data. */
    void established(byte[] privateData) {
        lock.lock();
        try {
            peer(privateData);
            state = State.OPEN;
            setupEvents = null;
        } finally {
            lock.unlock();
        }
    }

    /** Passive side, on the CM thread: create the QP and accept; {@code whenEstablished} runs on ESTABLISHED. */
    void accept(VerbsTransport.CmEvent request, Runnable whenEstablished) {
        peer(request.privateData());
        createResources();
        lock.lock();
        try {
            state = State.ACCEPTING;
            onEstablished = whenEstablished;
        } finally {
            lock.unlock();
        }
        try (Arena a = Arena.ofConfined()) {
            int responder = Math.min(transport.readDepth, Math.max(1, request.initiatorDepth()));
            int initiator = Math.min(transport.readDepth, Math.max(1, request.responderResources()));
            NativeCalls.check("rdma_accept", NativeCalls.ACCEPT, id, connParam(a, responder, initiator));
        }
    }

    /** On the CM thread. */
    void onCmEvent(VerbsTransport.CmEvent e) {
        BlockingQueue<VerbsTransport.CmEvent> q = setupEvents;
        if (q != null) {
            q.add(e);
            return;
        }
        int type = e.type();
        Runnable handOver = null;
        lock.lock();
        try {
            if (state == State.ACCEPTING && type == RdmaBindings.RDMA_CM_EVENT_ESTABLISHED()) {
                state = State.OPEN;
                handOver = onEstablished;
                onEstablished = null;
            }
        } finally {
            lock.unlock();
        }
        if (handOver != null) {
            handOver.run();
            return;
        }
        if (type == RdmaBindings.RDMA_CM_EVENT_DISCONNECTED() || type == RdmaBindings.RDMA_CM_EVENT_DEVICE_REMOVAL()
                || type == RdmaBindings.RDMA_CM_EVENT_CONNECT_ERROR() || type == RdmaBindings.RDMA_CM_EVENT_UNREACHABLE()
                || type == RdmaBindings.RDMA_CM_EVENT_REJECTED()) {
            boolean unattached;
            lock.lock();
            try {
                unattached = state == State.ACCEPTING;
            } finally {
                lock.unlock();
            }
            if (unattached) {
                destroyUnattached();
            } else {
                beginClose(new ConnectionClosedException("connection to " + remote + " ended: " + e.describe()
                        + (type == RdmaBindings.RDMA_CM_EVENT_DISCONNECTED() ? " (the peer closed it or died)" : "")));
            }
        }
    }

    // ---- operations ----

    @Override
    public void start(ConnectionEvents events) {
        List<ByteBuffer> queued;
        boolean closedAlready;
        RdmaException cause;
        lock.lock();
        try {
            this.events = events;
            queued = new ArrayList<>(early);
            early.clear();
            closedAlready = state == State.CLOSED && !closedReported;
            if (closedAlready) {
                closedReported = true;
            }
            cause = closeCause;
        } finally {
            lock.unlock();
        }
        queued.forEach(events::onMessage);
        if (closedAlready) {
            events.onClosed(cause);
        }
    }

    @Override
    public CompletableFuture<Void> read(long remoteAddress, long remoteKey, MemorySegment sink, ProviderRegion localRegion) {
        return postSingle(RdmaBindings.IBV_WR_RDMA_READ(), "read", remoteAddress, remoteKey, sink, localRegion);
    }

    @Override
    public List<CompletableFuture<Void>> readAll(List<ProviderRead> reads) {
        List<CompletableFuture<Void>> results = new ArrayList<>(reads.size());
        for (int from = 0; from < reads.size(); from += BATCH) {
            List<ProviderRead> chunk = reads.subList(from, Math.min(reads.size(), from + BATCH));
            results.addAll(postOneSided(RdmaBindings.IBV_WR_RDMA_READ(), "read", chunk));
        }
        return results;
    }

    @Override
    public CompletableFuture<Void> write(long remoteAddress, long remoteKey, MemorySegment source, ProviderRegion localRegion) {
        return postSingle(RdmaBindings.IBV_WR_RDMA_WRITE(), "write", remoteAddress, remoteKey, source, localRegion);
    }

    /** One signalled one-sided work request: the latency path, without the lists a chain needs. */
    private CompletableFuture<Void> postSingle(int opcode, String operation, long remoteAddress, long remoteKey,
                                               MemorySegment local, ProviderRegion localRegion) {
        CompletableFuture<Void> f = new CompletableFuture<>();
        if (local.byteSize() == 0) {
            f.complete(null); // NICs do not check keys for zero-length transfers either
            return f;
        }
        lock.lock();
        try {
            if (state != State.OPEN) {
                f.completeExceptionally(closedException());
                return f;
            }
            long wrId = nextWrId;
            // Only what changes from one request to the next: perftest, too, posts a work request it built once.
            ibv_send_wr.wr_id(singleWr, wrId);
            ibv_send_wr.opcode(singleWr, opcode);
            ibv_sge.addr(singleSge, local.address());
            ibv_sge.length(singleSge, (int) local.byteSize());
            ibv_sge.lkey(singleSge, (int) localRegion.localKey());
            ibv_send_wr.wr.rdma.remote_addr(singleRdma, remoteAddress);
            ibv_send_wr.wr.rdma.rkey(singleRdma, (int) remoteKey);
            int rc = qpOps.postSend(singleWr, badWr);
            if (rc != 0) {
                f.completeExceptionally(new RdmaException("ibv_post_send of 1 " + operation + " failed: errno " + rc));
                return f;
            }
            nextWrId++;
            sendQueue.add(new Pending(wrId, operation, f, -1));
        } finally {
            lock.unlock();
        }
        return f;
    }

    /** Under lock: work request {@code i} of a chain of {@code n} (only the last is signalled). */
    private void fillWorkRequest(int i, int n, int opcode, long wrId, long remoteAddress, long remoteKey,
                                 MemorySegment local, ProviderRegion localRegion) {
        MemorySegment sge = ibv_sge.asSlice(sendSges, i);
        ibv_sge.addr(sge, local.address());
        ibv_sge.length(sge, (int) local.byteSize());
        ibv_sge.lkey(sge, (int) localRegion.localKey());
        MemorySegment wr = ibv_send_wr.asSlice(sendWrs, i);
        ibv_send_wr.wr_id(wr, wrId);
        ibv_send_wr.next(wr, i + 1 < n ? ibv_send_wr.asSlice(sendWrs, i + 1) : MemorySegment.NULL);
        ibv_send_wr.sg_list(wr, sge);
        ibv_send_wr.num_sge(wr, 1);
        ibv_send_wr.opcode(wr, opcode);
        ibv_send_wr.send_flags(wr, i + 1 == n ? RdmaBindings.IBV_SEND_SIGNALED() : 0);
        MemorySegment rdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(wr));
        ibv_send_wr.wr.rdma.remote_addr(rdma, remoteAddress);
        ibv_send_wr.wr.rdma.rkey(rdma, (int) remoteKey);
    }

    /**
     * Posts a chain of one-sided work requests with one ibv_post_send; only the last is signalled, since
     * an RC queue pair completes in order (errors are reported for every request regardless).
     */
    private List<CompletableFuture<Void>> postOneSided(int opcode, String operation, List<ProviderRead> ops) {
        List<CompletableFuture<Void>> futures = new ArrayList<>(ops.size());
        List<ProviderRead> toPost = new ArrayList<>(ops.size());
        List<CompletableFuture<Void>> posted = new ArrayList<>(ops.size());
        for (ProviderRead op : ops) {
            CompletableFuture<Void> f = new CompletableFuture<>();
            futures.add(f);
            if (op.sink().byteSize() == 0) {
                f.complete(null); // NICs do not check keys for zero-length transfers either
            } else {
                toPost.add(op);
                posted.add(f);
            }
        }
        if (toPost.isEmpty()) {
            return futures;
        }
        lock.lock();
        try {
            if (state != State.OPEN) {
                RdmaException e = closedException();
                posted.forEach(f -> f.completeExceptionally(e));
                return futures;
            }
            long firstId = nextWrId;
            int n = toPost.size();
            for (int i = 0; i < n; i++) {
                ProviderRead op = toPost.get(i);
                fillWorkRequest(i, n, opcode, firstId + i, op.remoteAddress(), op.remoteKey(), op.sink(), op.localRegion());
            }
            int rc = qpOps.postSend(sendWrs, badWr);
            if (rc != 0) {
                RdmaException e = new RdmaException("ibv_post_send of " + n + " " + operation + "(s) failed: errno " + rc);
                posted.forEach(f -> f.completeExceptionally(e));
                return futures;
            }
            nextWrId += n;
            for (int i = 0; i < n; i++) {
                sendQueue.add(new Pending(firstId + i, operation, posted.get(i), -1));
            }
        } finally {
            lock.unlock();
        }
        return futures;
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
            if (message.remaining() > peerMaxMessageSize) {
                f.completeExceptionally(new IllegalArgumentException("message of " + message.remaining()
                        + " bytes exceeds the peer's max-message-size " + peerMaxMessageSize));
                return f;
            }
            if (credits > 0 && waitingSends.isEmpty()) {
                credits--;
                postMessage(message, f, FLAG_DATA);
            } else {
                waitingSends.add(new Message(message, f));
            }
        } finally {
            lock.unlock();
        }
        return f;
    }

    /** Under lock: copies into a staging slot and posts a signalled SEND carrying the owed credits. */
    private void postMessage(ByteBuffer payload, CompletableFuture<Void> f, int flag) {
        Integer slot = freeSendSlots.poll();
        if (slot == null) {
            throw new IllegalStateException("no free send slot although credits allowed a send");
        }
        MemorySegment s = sendBuf.asSlice((long) slot * slotSize, slotSize);
        int length = payload == null ? 0 : payload.remaining();
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 0, owedCredits);
        s.set(ValueLayout.JAVA_INT_UNALIGNED, 4, flag);
        owedCredits = 0;
        if (length > 0) {
            s.asSlice(HEADER, length).copyFrom(MemorySegment.ofBuffer(payload));
        }
        MemorySegment sge = ibv_sge.asSlice(sendSges, 0);
        ibv_sge.addr(sge, s.address());
        ibv_sge.length(sge, HEADER + length);
        ibv_sge.lkey(sge, sendLkey);
        MemorySegment wr = ibv_send_wr.asSlice(sendWrs, 0);
        long wrId = nextWrId++;
        ibv_send_wr.wr_id(wr, wrId);
        ibv_send_wr.next(wr, MemorySegment.NULL);
        ibv_send_wr.sg_list(wr, sge);
        ibv_send_wr.num_sge(wr, 1);
        ibv_send_wr.opcode(wr, RdmaBindings.IBV_WR_SEND());
        ibv_send_wr.send_flags(wr, RdmaBindings.IBV_SEND_SIGNALED());
        int rc = qpOps.postSend(wr, badWr);
        if (rc != 0) {
            freeSendSlots.add(slot);
            RdmaException e = new RdmaException("ibv_post_send of a message failed: errno " + rc);
            if (f != null) {
                f.completeExceptionally(e);
            }
            return;
        }
        sendQueue.add(new Pending(wrId, flag == FLAG_DATA ? "send" : "credit update", f, slot));
    }

    /** Under lock: sends waiting messages while credits last, else a credit-only message when half are owed. */
    private void flushSends() {
        while (credits > 0 && !waitingSends.isEmpty() && !freeSendSlots.isEmpty()) {
            Message m = waitingSends.poll();
            credits--;
            postMessage(m.payload(), m.future(), FLAG_DATA);
        }
        if (owedCredits >= Math.max(1, transport.receiveDepth / 2) && waitingSends.isEmpty() && !freeSendSlots.isEmpty()) {
            postMessage(null, null, FLAG_CREDIT);
        }
    }

    // ---- progress (progress thread only) ----

    /** Progress thread, before sleeping: asks for an event on the next completion (skipped while a caller polls). */
    void arm() {
        if (pollLock.tryLock()) {
            try {
                if (!torn && cqOps != null) {
                    cqOps.requestNotify(false);
                }
            } finally {
                pollLock.unlock();
            }
        }
    }

    /** Progress thread's answer from {@link #progress()}: a caller is polling this CQ right now. */
    static final int CALLER_POLLING = -1;

    /**
     * Progress thread: polls this connection's CQ once and tears down when closing and drained. Returns
     * the completions found, or {@link #CALLER_POLLING} when a waiting caller holds the CQ.
     */
    int progress() {
        if (spinningCallers.get() > 0 || !pollLock.tryLock()) {
            return CALLER_POLLING;
        }
        try {
            if (torn) {
                return 0;
            }
            int n = reap();
            State s;
            boolean drained;
            long deadline;
            lock.lock();
            try {
                s = state;
                drained = sendQueue.isEmpty();
                deadline = closeDeadline;
            } finally {
                lock.unlock();
            }
            if (s == State.CLOSING && (drained || System.nanoTime() - deadline > 0)) {
                finish();
            }
            return Math.max(n, 0);
        } finally {
            pollLock.unlock();
        }
    }

    /** Under pollLock: one ibv_poll_cq, each completion dispatched in this thread. */
    private int reap() {
        int n = cqOps.poll(POLL_BATCH, completions);
        for (int i = 0; i < n; i++) {
            MemorySegment wc = ibv_wc.asSlice(completions, i);
            long wrId = ibv_wc.wr_id(wc);
            int status = ibv_wc.status(wc);
            if ((wrId & RECV_BIT) != 0) {
                onReceive((int) (wrId & ~RECV_BIT), status, ibv_wc.byte_len(wc));
            } else {
                onSendCompletion(wrId, status);
            }
        }
        if (n < 0) {
            beginClose(new ConnectionClosedException("ibv_poll_cq failed (" + n + ") on " + this));
        }
        return n;
    }

    /**
     * The caller polls the CQ itself for up to {@code verbs.await-spin-micros}, as perftest does, then
     * blocks on the future and leaves the polling to the progress thread.
     */
    @Override
    public boolean await(CompletableFuture<Void> operation, long deadlineNanos) {
        callerWaits++; // a lost increment between two racing callers is harmless: any change counts
        // While a caller spins here the progress thread keeps off this CQ: it would only hold the poll lock the
        // caller needs, to reap the caller's own completion. A caller that stops spinning counts as blocked
        // before it stops counting as spinning, so the progress thread never takes the CQ for nobody's.
        spinningCallers.incrementAndGet();
        try {
            if (transport.awaitSpinNanos > 0) {
                spinUntilDone(operation, deadlineNanos);
            }
            if (operation.isDone()) {
                return true;
            }
            blockedCallers.incrementAndGet();
        } finally {
            spinningCallers.decrementAndGet();
        }
        try {
            armForBlockedCaller();
            return ProviderConnection.super.await(operation, deadlineNanos);
        } finally {
            blockedCallers.decrementAndGet();
        }
    }

    /**
     * The progress thread leaves a CQ that callers poll unarmed; a caller about to block arms it, so that its
     * completion wakes the progress thread, and reaps once for a completion that came before the arming.
     * When the poll lock is busy, another caller is polling and reaps for everyone.
     */
    private void armForBlockedCaller() {
        if (pollLock.tryLock()) {
            try {
                if (!torn && cqOps != null) {
                    cqOps.requestNotify(false);
                    reap();
                }
            } finally {
                pollLock.unlock();
            }
        }
    }

    /**
     * Whether this CQ is, for now, its callers' to poll: one spins on it in {@link #await}, or did within about
     * {@code recentNanos}, and none is blocked waiting for the progress thread. Called by the progress thread only,
     * which times the callers' waits with its own clock.
     */
    boolean polledByCaller(long now, long recentNanos) {
        if (blockedCallers.get() > 0) {
            return false;
        }
        int waits = callerWaits;
        if (spinningCallers.get() > 0 || waits != callerWaitsSeen) {
            callerWaitsSeen = waits;
            callerSeenAt = now;
            return true;
        }
        return now - callerSeenAt < recentNanos;
    }

    /** Polls until the operation is done, the deadline or the spin budget has passed, or the CQ is torn down. */
    private void spinUntilDone(CompletableFuture<Void> operation, long deadlineNanos) {
        // The clock is read every CLOCK_EVERY_POLLS polls only: where the clock source is slow (a VM without a
        // usable TSC makes every read a system call) reading it per poll costs more than the poll.
        long spinUntil = 0;
        boolean spinning = false; // from the first clock read on: the spin starts a few polls late
        int polls = 0;
        while (!operation.isDone()) {
            if (++polls % CLOCK_EVERY_POLLS == 0) {
                long now = System.nanoTime();
                if (now - deadlineNanos >= 0) {
                    return;
                }
                if (!spinning) {
                    spinning = true;
                    spinUntil = now + transport.awaitSpinNanos;
                } else if (now - spinUntil >= 0) {
                    return;
                }
            }
            if (pollLock.tryLock()) {
                try {
                    if (torn) {
                        return; // torn down: the progress thread has failed what was pending
                    }
                    reap();
                } finally {
                    pollLock.unlock();
                }
            } else {
                Thread.onSpinWait();
            }
        }
    }

    private void onSendCompletion(long wrId, int status) {
        // Usually one request completes; unsignalled ones of a chain posted before it complete with it.
        Pending last = null;
        List<Pending> earlier = null;
        lock.lock();
        try {
            while (!sendQueue.isEmpty()) {
                Pending p = sendQueue.poll();
                if (p.sendSlot >= 0) {
                    freeSendSlots.add(p.sendSlot);
                }
                if (last != null) {
                    if (earlier == null) {
                        earlier = new ArrayList<>();
                    }
                    earlier.add(last);
                }
                last = p;
                if (p.wrId == wrId) {
                    break;
                }
            }
            if (status == WorkCompletions.SUCCESS && state == State.OPEN) {
                flushSends();
            }
        } finally {
            lock.unlock();
        }
        if (status != WorkCompletions.SUCCESS) {
            // the QP is in the error state: closed for the facade before the failure is seen
            beginClose(new ConnectionClosedException("the queue pair to " + remote + " failed ("
                    + NativeCalls.wcStatus(status) + "); the connection is closed"));
            reportClosed();
        }
        if (earlier != null) {
            for (Pending p : earlier) {
                if (p.future != null) {
                    p.future.complete(null);
                }
            }
        }
        if (last == null || last.future == null) {
            return;
        }
        if (status != WorkCompletions.SUCCESS) {
            last.future.completeExceptionally(WorkCompletions.exception(status, NativeCalls.wcStatus(status), last.operation,
                    String.valueOf(remote)));
        } else {
            last.future.complete(null);
        }
    }

    private void onReceive(int slot, int status, int byteLength) {
        if (status != WorkCompletions.SUCCESS) {
            if (status == WorkCompletions.WR_FLUSH_ERR && transport.iwarp) {
                return; // iWARP: a refusal already ends the connection (TERMINATE, then the CM disconnect)
            }
            // A flushed receive while open means the QP entered the error state on its own: as a responder
            // after refusing a peer's one-sided request (which never completes here), or after an
            // asynchronous error. Disconnect at once, so the peer learns it now, not at its operation timeout.
            beginClose(new ConnectionClosedException("receive from " + remote + " failed: " + NativeCalls.wcStatus(status)
                    + (status == WorkCompletions.WR_FLUSH_ERR ? " (the queue pair entered the error state)" : "")));
            return;
        }
        MemorySegment s = recvBuf.asSlice((long) slot * slotSize, slotSize);
        int returned = s.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
        int flag = s.get(ValueLayout.JAVA_INT_UNALIGNED, 4);
        ByteBuffer message = null;
        if (flag == FLAG_DATA) {
            int length = byteLength - HEADER;
            message = ByteBuffer.allocate(length);
            MemorySegment.ofBuffer(message).copyFrom(s.asSlice(HEADER, length));
        }
        ConnectionEvents deliverTo = null;
        lock.lock();
        try {
            if (state == State.CLOSING || state == State.CLOSED) {
                return;
            }
            postReceive(slot);
            credits += returned;
            if (flag == FLAG_DATA) {
                owedCredits++;
            }
            flushSends();
            if (message != null) {
                if (events == null) {
                    early.add(message);
                } else {
                    deliverTo = events;
                }
            }
        } finally {
            lock.unlock();
        }
        if (deliverTo != null) {
            deliverTo.onMessage(message);
        }
    }

    // ---- closing ----

    private RdmaException closedException() {
        RdmaException c = closeCause;
        return c instanceof ConnectionClosedException ? c
                : new ConnectionClosedException("connection to " + remote + " is closed" + (c == null ? "" : ": " + c.getMessage()), c);
    }

    @Override
    public void close() {
        beginClose(new ConnectionClosedException("connection to " + remote + " was closed locally"));
    }

    /** Moves the QP to the error state (flushing what is posted); the progress thread then tears down. */
    void beginClose(RdmaException cause) {
        lock.lock();
        try {
            if (state == State.CLOSING || state == State.CLOSED) {
                return;
            }
            if (state != State.OPEN) {
                // not attached yet: the setup path owns teardown
                closeCause = cause;
                return;
            }
            state = State.CLOSING;
            closeCause = cause;
            closeDeadline = System.nanoTime() + CLOSE_DRAIN_NANOS;
            // Under the lock: the progress thread destroys the id only after taking it (in finish).
            RdmaBindings.rdma_disconnect(id);
        } finally {
            lock.unlock();
        }
    }

    /** Progress thread: destroys the QP first (no more DMA), then fails what is left and frees everything. */
    private void finish() {
        List<Pending> left;
        List<Message> unsent;
        lock.lock();
        try {
            state = State.CLOSED;
            left = new ArrayList<>(sendQueue);
            sendQueue.clear();
            unsent = new ArrayList<>(waitingSends);
            waitingSends.clear();
        } finally {
            lock.unlock();
        }
        transport.detach(this);
        torn = true; // under pollLock (finish runs inside progress())
        releaseNative();
        // Report the close before failing what was pending: whoever sees an operation fail as closed
        // then also sees the connection closed.
        reportClosed();
        RdmaException failure = closedException();
        for (Pending p : left) {
            if (p.future != null) {
                p.future.completeExceptionally(failure);
            }
        }
        unsent.forEach(m -> m.future().completeExceptionally(failure));
    }

    /** Tells the facade once that the connection is closed (with the first cause). */
    private void reportClosed() {
        ConnectionEvents e;
        lock.lock();
        try {
            e = closedReported ? null : events;
            if (e != null) {
                closedReported = true;
            }
        } finally {
            lock.unlock();
        }
        if (e != null) {
            e.onClosed(closeCause);
        }
    }

    /** Teardown of a connection that never reached the progress thread (setup failed or was refused). */
    void destroyUnattached() {
        pollLock.lock();
        try {
            torn = true;
        } finally {
            pollLock.unlock();
        }
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
        transport.forgetCmEvents(id);
        if (qp != null) {
            RdmaBindings.rdma_destroy_qp(id);
        }
        if (cq != null) {
            int rc = RdmaBindings.ibv_destroy_cq(cq);
            if (rc != 0) {
                LOG.log(System.Logger.Level.WARNING, "ibv_destroy_cq failed: " + rc);
            }
        }
        if (recvMr != null) {
            RdmaBindings.ibv_dereg_mr(recvMr);
        }
        if (sendMr != null) {
            RdmaBindings.ibv_dereg_mr(sendMr);
        }
        RdmaBindings.rdma_destroy_id(id);
        arena.close();
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
