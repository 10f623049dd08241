package io.rdma4j.it.lab;

import io.rdma4j.nativeloader.Completions;
import io.rdma4j.nativeloader.Poll;
import io.rdma4j.nativeloader.RdmaCm;
import io.rdma4j.nativeloader.ReceiveQueue;
import io.rdma4j.nativeloader.SendQueue;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.VerbsOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * A verbs peer built from the native-loader bindings alone, not from rdma4j's provider: it sends whatever connect
 * private data and SENDs a test asks for, as a hostile or broken peer would. Not thread-safe; one connection.
 */
final class RawVerbsPeer implements AutoCloseable {

    /** rdma4j's verbs wire format, written out here so the peer does not borrow the provider's code. */
    static final int MAGIC_V1 = 0x52344A01;
    /** Version 2: version 1's fields, flags (1: requires a proof of the shared secret), a 16-byte nonce. */
    static final int MAGIC_V2 = 0x52344A02;
    static final int CONNECT_FLAG_AUTH = 1;
    static final int FLAG_PROOF = 2;
    static final int SLOT_HEADER = 8;
    static final int FLAG_DATA = 0;
    private static final int SLOTS = 8;
    private static final int SLOT_SIZE = 8192;
    private static final long RECV_TAG = 1L << 62;
    private static final int EVENT_WAIT_MS = 60_000;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment channel;
    private final MemorySegment id;
    private final Poll events;
    private MemorySegment pd;
    private MemorySegment cq;
    private boolean qp;
    private Verbs.MemoryRegion sendRegion;
    private Verbs.MemoryRegion receiveRegion;
    private MemorySegment sendBuffer;
    private SendQueue sendQueue;
    private Completions completions;
    private long nextWrId = 1;
    /** The connect's outcome: the event that ended it (ESTABLISHED, or what refused it). */
    private RdmaCm.Event outcome;
    /** Messages the responder sent this peer (successful receive completions seen so far). */
    private int received;

    private RawVerbsPeer() {
        channel = RdmaCm.createEventChannel();
        id = RdmaCm.createId(channel);
        events = Poll.forReading(RdmaCm.eventChannelFd(channel), arena);
    }

    /** Private data as rdma4j's verbs provider writes it: magic, max message size, receive depth. */
    static byte[] privateData(int magic, int maxMessageSize, int receiveDepth) {
        return ByteBuffer.allocate(12).putInt(magic).putInt(maxMessageSize).putInt(receiveDepth).array();
    }

    /** Version 2 private data: version 1's, then {@code flags} and {@code nonce}. */
    static byte[] privateDataV2(int maxMessageSize, int receiveDepth, int flags, byte[] nonce) {
        return ByteBuffer.allocate(16 + nonce.length).putInt(MAGIC_V2).putInt(maxMessageSize).putInt(receiveDepth)
                .putInt(flags).put(nonce).array();
    }

    /** Connects from {@code local} to {@code remote} with {@code privateData}; see {@link #outcome()}. */
    static RawVerbsPeer connect(String local, InetSocketAddress remote, byte[] privateData) {
        RawVerbsPeer p = new RawVerbsPeer();
        try {
            RdmaCm.resolveAddress(p.id, new InetSocketAddress(local, 0), remote, EVENT_WAIT_MS);
            p.expect(RdmaCm.ADDR_RESOLVED);
            RdmaCm.resolveRoute(p.id, EVENT_WAIT_MS);
            p.expect(RdmaCm.ROUTE_RESOLVED);
            MemorySegment context = RdmaCm.deviceContext(p.id);
            p.pd = Verbs.allocateProtectionDomain(context);
            p.cq = Verbs.createCompletionQueue(context, 64, MemorySegment.NULL);
            p.completions = new Completions(VerbsOps.ofCompletionQueue(p.cq), p.arena, 16);
            MemorySegment qp = RdmaCm.createQueuePair(p.id, p.pd, p.cq, 16, SLOTS);
            p.qp = true;
            VerbsOps.QueuePairOps ops = VerbsOps.ofQueuePair(qp);
            p.sendBuffer = p.arena.allocate(SLOT_SIZE, 4096);
            MemorySegment receiveBuffer = p.arena.allocate((long) SLOTS * SLOT_SIZE, 4096);
            p.sendRegion = Verbs.registerMemory(p.pd, p.sendBuffer.address(), p.sendBuffer.byteSize(), 0);
            p.receiveRegion = Verbs.registerMemory(p.pd, receiveBuffer.address(), receiveBuffer.byteSize(), 1 /* LOCAL_WRITE */);
            p.sendQueue = new SendQueue(ops, p.arena);
            ReceiveQueue receives = new ReceiveQueue(ops, p.arena, receiveBuffer, SLOTS, SLOT_SIZE, p.receiveRegion.lkey(),
                    RECV_TAG);
            for (int i = 0; i < SLOTS; i++) {
                check("ibv_post_recv", receives.post(i));
            }
            RdmaCm.connect(p.id, new RdmaCm.ConnectionParameters(privateData, 1, 1, 7, 7));
            p.outcome = p.nextEvent();
            return p;
        } catch (RuntimeException e) {
            p.close();
            throw e;
        }
    }

    /** The event that ended the connect: ESTABLISHED, or REJECTED (or another error) when refused. */
    RdmaCm.Event outcome() {
        return outcome;
    }

    boolean established() {
        return outcome != null && outcome.type() == RdmaCm.ESTABLISHED;
    }

    /** An rdma4j data message: slot header (credits returned, flag), then {@code payload}. */
    static byte[] slot(int returnedCredits, int flag, byte[] payload) {
        return ByteBuffer.allocate(SLOT_HEADER + payload.length).order(ByteOrder.nativeOrder())
                .putInt(returnedCredits).putInt(flag).put(payload).array();
    }

    /** An rdma4j plain message (16-byte message header: version 1, kind MESSAGE) carrying {@code body}. */
    static byte[] message(byte version, byte[] body) {
        return ByteBuffer.allocate(16 + body.length).put(version).put((byte) 1).put((byte) 0).put((byte) 0).putInt(0)
                .putLong(0).put(body).array();
    }

    /** Posts one SEND of exactly {@code bytes} (any length up to the peer's buffer, 0 included) and waits for it. */
    void send(byte[] bytes) {
        if (bytes.length > sendBuffer.byteSize()) {
            throw new IllegalArgumentException("at most " + sendBuffer.byteSize() + " bytes");
        }
        MemorySegment.copy(bytes, 0, sendBuffer, ValueLayout.JAVA_BYTE, 0, bytes.length);
        long wrId = nextWrId++;
        check("ibv_post_send", sendQueue.postSend(wrId, sendBuffer.address(), bytes.length, sendRegion.lkey()));
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (System.nanoTime() < deadline) {
            int n = completions.poll();
            boolean done = false;
            for (int i = 0; i < n; i++) {
                count(i);
                done |= completions.wrId(i) == wrId; // sent, or failed because the responder cut the connection
            }
            if (done) {
                return;
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("the SEND of " + bytes.length + " bytes never completed");
    }

    /** How many messages the responder has sent this peer, its completion queue polled now. */
    int receivedMessages() {
        int n = completions.poll();
        for (int i = 0; i < n; i++) {
            count(i);
        }
        return received;
    }

    private void count(int i) {
        if ((completions.wrId(i) & RECV_TAG) != 0 && completions.status(i) == 0) {
            received++;
        }
    }

    /** Waits until the connection ends (the responder disconnects); returns the event, or null past the wait. */
    RdmaCm.Event awaitDisconnect(int timeoutMs) {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        List<String> seen = new ArrayList<>();
        while (System.nanoTime() < deadline) {
            if (events.awaitReadable(100)) {
                RdmaCm.Event e = RdmaCm.nextEvent(channel);
                if (e != null && RdmaCm.endsConnection(e.type())) {
                    return e;
                }
                if (e != null) {
                    seen.add(e.describe());
                }
            }
        }
        return null;
    }

    private RdmaCm.Event nextEvent() {
        if (!events.awaitReadable(EVENT_WAIT_MS)) {
            throw new AssertionError("no rdma_cm event within " + EVENT_WAIT_MS + " ms");
        }
        RdmaCm.Event e = RdmaCm.nextEvent(channel);
        if (e == null) {
            throw new AssertionError("rdma_get_cm_event failed");
        }
        return e;
    }

    private void expect(int type) {
        RdmaCm.Event e = nextEvent();
        if (e.type() != type) {
            throw new AssertionError("expected " + RdmaCm.eventName(type) + ", got " + e.describe());
        }
    }

    private static void check(String call, int rc) {
        if (rc != 0) {
            throw new AssertionError(call + " failed: errno " + rc);
        }
    }

    @Override
    public void close() {
        if (qp) {
            RdmaCm.disconnect(id);
            RdmaCm.destroyQueuePair(id);
        }
        if (cq != null) {
            Verbs.destroyCompletionQueue(cq);
        }
        if (sendRegion != null) {
            Verbs.deregisterMemory(sendRegion);
        }
        if (receiveRegion != null) {
            Verbs.deregisterMemory(receiveRegion);
        }
        if (pd != null) {
            Verbs.deallocateProtectionDomain(pd);
        }
        RdmaCm.destroyId(id);
        RdmaCm.destroyEventChannel(channel);
        arena.close();
    }
}
