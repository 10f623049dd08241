package io.rdma4j.it.lab;

import io.rdma4j.nativeloader.Completions;
import io.rdma4j.nativeloader.Errno;
import io.rdma4j.nativeloader.NativeCallException;
import io.rdma4j.nativeloader.Poll;
import io.rdma4j.nativeloader.RdmaCm;
import io.rdma4j.nativeloader.SendQueue;
import io.rdma4j.nativeloader.SharedReceiveQueue;
import io.rdma4j.nativeloader.Verbs;
import io.rdma4j.nativeloader.VerbsOps;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * One shared receive queue under several reliable-connected queue pairs, on the device itself, through the
 * native loader's typed calls only: every SEND of every client lands in some SRQ slot with its bytes, and the
 * completion's qp_num names the server queue pair it came in on. As many slots as connections, so every
 * round after the first can only land in reposted slots.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class SharedReceiveQueueGuestTest {

    private static final int CONNECTIONS = 8;
    private static final int SLOTS = CONNECTIONS;
    private static final int SLOT_SIZE = 256;
    private static final int ROUNDS = 3;
    private static final long RECV_TAG = 1L << 62;
    private static final int EVENT_WAIT_MS = 60_000;
    private static final long COMPLETION_WAIT_NANOS = TimeUnit.SECONDS.toNanos(60);

    private final LabDevice device = LabDevice.current();

    /** One client connection: its cm id and queue pair, and the server side's. */
    private record Connection(int client, MemorySegment clientId, MemorySegment clientQp, MemorySegment serverId,
                              int serverQpNum) {
    }

    @Test
    void queuePairsOnOneSharedReceiveQueueReceiveIntoItsSlots() {
        List<String> teardownFailures = new ArrayList<>();
        try (Arena arena = Arena.ofShared()) {
            MemorySegment serverChannel = RdmaCm.createEventChannel();
            MemorySegment clientChannel = RdmaCm.createEventChannel();
            Poll serverEvents = Poll.forReading(RdmaCm.eventChannelFd(serverChannel), arena);
            Poll clientEvents = Poll.forReading(RdmaCm.eventChannelFd(clientChannel), arena);
            MemorySegment listenId = RdmaCm.createId(serverChannel);
            RdmaCm.bind(listenId, new InetSocketAddress(device.address(), 0));
            RdmaCm.listen(listenId, CONNECTIONS);
            InetSocketAddress server = new InetSocketAddress(device.address(), RdmaCm.sourcePort(listenId));

            // librdmacm opens each device once: the listener's context is every id's on this device
            MemorySegment context = RdmaCm.deviceContext(listenId);
            MemorySegment serverPd = Verbs.allocateProtectionDomain(context);
            MemorySegment serverCq = Verbs.createCompletionQueue(context, 64, MemorySegment.NULL);
            MemorySegment srq = createSharedReceiveQueue(serverPd);
            checkAttributes(srq);
            MemorySegment receiveBuffer = arena.allocate((long) SLOTS * SLOT_SIZE, 4096);
            Verbs.MemoryRegion receiveRegion = Verbs.registerMemory(serverPd, receiveBuffer.address(),
                    receiveBuffer.byteSize(), 1 /* IBV_ACCESS_LOCAL_WRITE */);
            SharedReceiveQueue receives = new SharedReceiveQueue(VerbsOps.ofSharedReceiveQueue(srq), arena,
                    receiveBuffer, SLOTS, SLOT_SIZE, receiveRegion.lkey(), RECV_TAG);
            for (int slot = 0; slot < SLOTS; slot++) {
                check("ibv_post_srq_recv", receives.post(slot));
            }
            Completions serverCompletions = new Completions(VerbsOps.ofCompletionQueue(serverCq), arena, 16);

            MemorySegment clientPd = Verbs.allocateProtectionDomain(context);
            MemorySegment clientCq = Verbs.createCompletionQueue(context, 64, MemorySegment.NULL);
            Completions clientCompletions = new Completions(VerbsOps.ofCompletionQueue(clientCq), arena, 16);
            MemorySegment sendBuffer = arena.allocate((long) CONNECTIONS * SLOT_SIZE, 4096);
            Verbs.MemoryRegion sendRegion = Verbs.registerMemory(clientPd, sendBuffer.address(), sendBuffer.byteSize(), 0);

            List<Connection> connections = new ArrayList<>();
            List<SendQueue> sendQueues = new ArrayList<>();
            try {
                for (int i = 0; i < CONNECTIONS; i++) {
                    Connection c = connect(i, server, clientChannel, clientEvents, serverChannel, serverEvents, clientPd,
                            clientCq, serverPd, serverCq, srq);
                    connections.add(c);
                    sendQueues.add(new SendQueue(VerbsOps.ofQueuePair(c.clientQp()), arena));
                }
                Map<Integer, Integer> clientByServerQpNum = new HashMap<>();
                for (Connection c : connections) {
                    clientByServerQpNum.put(c.serverQpNum(), c.client());
                }
                assertThat(clientByServerQpNum).as("one server queue pair number per connection").hasSize(CONNECTIONS);

                try (ExecutorService reposters = Executors.newFixedThreadPool(4)) {
                    for (int round = 0; round < ROUNDS; round++) {
                        List<Integer> consumed = exchange(round, sendQueues, sendBuffer, sendRegion, clientCompletions,
                                serverCompletions, receiveBuffer, clientByServerQpNum);
                        // as completions of several connections would: repost from several threads at once
                        List<Future<Integer>> reposts = new ArrayList<>();
                        for (int slot : consumed) {
                            reposts.add(reposters.submit(() -> receives.post(slot)));
                        }
                        for (Future<Integer> f : reposts) {
                            check("ibv_post_srq_recv", f.get());
                        }
                    }
                }
            } catch (Exception e) {
                throw new AssertionError(e);
            } finally {
                // queue pairs first (an SRQ in use cannot go), then the SRQ, then what they received into
                for (Connection c : connections) {
                    RdmaCm.disconnect(c.clientId());
                    RdmaCm.disconnect(c.serverId());
                    RdmaCm.destroyQueuePair(c.clientId());
                    RdmaCm.destroyQueuePair(c.serverId());
                }
                expectZero(teardownFailures, "ibv_destroy_srq", Verbs.destroySharedReceiveQueue(srq));
                expectZero(teardownFailures, "ibv_destroy_cq(server)", Verbs.destroyCompletionQueue(serverCq));
                expectZero(teardownFailures, "ibv_destroy_cq(client)", Verbs.destroyCompletionQueue(clientCq));
                expectZero(teardownFailures, "ibv_dereg_mr(receive)", Verbs.deregisterMemory(receiveRegion));
                expectZero(teardownFailures, "ibv_dereg_mr(send)", Verbs.deregisterMemory(sendRegion));
                expectZero(teardownFailures, "ibv_dealloc_pd(server)", Verbs.deallocateProtectionDomain(serverPd));
                expectZero(teardownFailures, "ibv_dealloc_pd(client)", Verbs.deallocateProtectionDomain(clientPd));
                for (Connection c : connections) {
                    RdmaCm.destroyId(c.clientId());
                    RdmaCm.destroyId(c.serverId());
                }
                RdmaCm.destroyId(listenId);
                RdmaCm.destroyEventChannel(clientChannel);
                RdmaCm.destroyEventChannel(serverChannel);
            }
        }
        assertThat(teardownFailures).as("teardown results").isEmpty();
    }

    /** On siw the SRQ is part of what is tested: a refusal fails with its errno instead of skipping. */
    private MemorySegment createSharedReceiveQueue(MemorySegment pd) {
        try {
            return Verbs.createSharedReceiveQueue(pd, SLOTS, 0);
        } catch (NativeCallException e) {
            return fail("[" + device.name() + "] " + device.kind() + " refused a shared receive queue: " + e.getMessage()
                    + " (errno " + e.errno() + ")", e);
        }
    }

    /** rxe reports what it made of the request; siw's user-space provider (rdma-core 44) has no query_srq. */
    private void checkAttributes(MemorySegment srq) {
        try {
            Verbs.SharedReceiveQueueAttributes attributes = Verbs.querySharedReceiveQueue(srq);
            System.out.println("[" + device.name() + "] SRQ asked for " + SLOTS + " work requests, got " + attributes);
            assertThat(attributes.maxWr()).isGreaterThanOrEqualTo(SLOTS);
            assertThat(attributes.maxSge()).isGreaterThanOrEqualTo(1);
        } catch (NativeCallException e) {
            if (device.kind() != LabDevice.Kind.SIW || e.errno() != Errno.EOPNOTSUPP) {
                throw e;
            }
            System.out.println("[" + device.name() + "] " + e.getMessage());
        }
    }

    private Connection connect(int client, InetSocketAddress server, MemorySegment clientChannel, Poll clientEvents,
                               MemorySegment serverChannel, Poll serverEvents, MemorySegment clientPd,
                               MemorySegment clientCq, MemorySegment serverPd, MemorySegment serverCq,
                               MemorySegment srq) {
        MemorySegment clientId = RdmaCm.createId(clientChannel);
        RdmaCm.resolveAddress(clientId, new InetSocketAddress(device.address(), 0), server, EVENT_WAIT_MS);
        expect(clientChannel, clientEvents, RdmaCm.ADDR_RESOLVED);
        RdmaCm.resolveRoute(clientId, EVENT_WAIT_MS);
        expect(clientChannel, clientEvents, RdmaCm.ROUTE_RESOLVED);
        // the client receives nothing; one receive work request keeps every provider content
        MemorySegment clientQp = RdmaCm.createQueuePair(clientId, clientPd, clientCq, 4, 1);
        byte[] hello = ByteBuffer.allocate(4).putInt(client).array();
        RdmaCm.connect(clientId, new RdmaCm.ConnectionParameters(hello, 1, 1, 7, 7));

        RdmaCm.Event request = expect(serverChannel, serverEvents, RdmaCm.CONNECT_REQUEST);
        assertThat(ByteBuffer.wrap(request.privateData()).getInt()).as("connect private data").isEqualTo(client);
        MemorySegment serverId = request.idHandle();
        MemorySegment serverQp = RdmaCm.createQueuePair(serverId, serverPd, serverCq, 4, srq);
        RdmaCm.accept(serverId, new RdmaCm.ConnectionParameters(new byte[0], 1, 1, 7, 7));
        awaitEstablished(clientChannel, clientEvents, serverChannel, serverEvents);
        return new Connection(client, clientId, clientQp, serverId, Verbs.queuePairNumber(serverQp));
    }

    /**
     * Every client SENDs one message; returns the slots they arrived in, after checking bytes and queue pair
     * numbers.
     */
    private List<Integer> exchange(int round, List<SendQueue> sendQueues, MemorySegment sendBuffer,
                                   Verbs.MemoryRegion sendRegion, Completions clientCompletions,
                                   Completions serverCompletions, MemorySegment receiveBuffer,
                                   Map<Integer, Integer> clientByServerQpNum) {
        for (int i = 0; i < CONNECTIONS; i++) {
            byte[] message = message(round, i);
            long offset = (long) i * SLOT_SIZE;
            MemorySegment.copy(message, 0, sendBuffer, ValueLayout.JAVA_BYTE, offset, message.length);
            check("ibv_post_send", sendQueues.get(i).postSend(round * 100L + i, sendBuffer.address() + offset,
                    message.length, sendRegion.lkey()));
        }
        int sent = 0;
        List<Integer> slots = new ArrayList<>();
        Set<Integer> senders = new HashSet<>();
        long deadline = System.nanoTime() + COMPLETION_WAIT_NANOS;
        while (sent < CONNECTIONS || slots.size() < CONNECTIONS) {
            if (System.nanoTime() > deadline) {
                fail("[" + device.name() + "] round " + round + ": " + sent + " sends and " + slots.size()
                        + " receives completed of " + CONNECTIONS);
            }
            int n = clientCompletions.poll();
            for (int k = 0; k < n; k++) {
                assertThat(clientCompletions.status(k)).as("send completion status: "
                        + Verbs.completionStatus(clientCompletions.status(k))).isZero();
                sent++;
            }
            n = serverCompletions.poll();
            for (int k = 0; k < n; k++) {
                assertThat(serverCompletions.status(k)).as("receive completion status: "
                        + Verbs.completionStatus(serverCompletions.status(k))).isZero();
                long wrId = serverCompletions.wrId(k);
                assertThat(wrId & RECV_TAG).as("a receive's work request id").isNotZero();
                int slot = (int) (wrId & ~RECV_TAG);
                Integer client = clientByServerQpNum.get(serverCompletions.qpNum(k));
                assertThat(client).as("qp_num " + serverCompletions.qpNum(k) + " is a server queue pair").isNotNull();
                byte[] expected = message(round, client);
                assertThat(serverCompletions.byteLength(k)).as("bytes received from client " + client)
                        .isEqualTo(expected.length);
                byte[] got = receiveBuffer.asSlice((long) slot * SLOT_SIZE, expected.length).toArray(ValueLayout.JAVA_BYTE);
                assertThat(new String(got, StandardCharsets.US_ASCII)).as("slot " + slot)
                        .isEqualTo(new String(expected, StandardCharsets.US_ASCII));
                assertThat(senders.add(client)).as("client " + client + " received once in round " + round).isTrue();
                slots.add(slot);
            }
            if (n == 0) {
                Thread.onSpinWait();
            }
        }
        assertThat(slots).as("every slot used once").doesNotHaveDuplicates().hasSize(SLOTS);
        System.out.println("[" + device.name() + "] SRQ round " + round + ": slots in arrival order " + slots);
        return slots;
    }

    /** A message whose bytes and length both tell round and client apart. */
    private static byte[] message(int round, int client) {
        return ("round " + round + " from client " + client + " " + "x".repeat(client * 7 + round))
                .getBytes(StandardCharsets.US_ASCII);
    }

    /**
     * Both sides' ESTABLISHED, in whichever order they come: on RoCE the server's needs the client's
     * rdma_get_cm_event first (librdmacm moves the client queue pair to RTS and sends the RTU from there).
     */
    private static void awaitEstablished(MemorySegment clientChannel, Poll clientEvents, MemorySegment serverChannel,
                                         Poll serverEvents) {
        boolean client = false;
        boolean server = false;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(EVENT_WAIT_MS);
        while (!(client && server)) {
            if (System.nanoTime() > deadline) {
                fail("within " + EVENT_WAIT_MS + " ms: client ESTABLISHED " + client + ", server ESTABLISHED " + server);
            }
            if (!client && clientEvents.awaitReadable(20)) {
                expectEvent(RdmaCm.nextEvent(clientChannel), RdmaCm.ESTABLISHED);
                client = true;
            }
            if (!server && serverEvents.awaitReadable(20)) {
                expectEvent(RdmaCm.nextEvent(serverChannel), RdmaCm.ESTABLISHED);
                server = true;
            }
        }
    }

    private static RdmaCm.Event expect(MemorySegment channel, Poll events, int type) {
        if (!events.awaitReadable(EVENT_WAIT_MS)) {
            fail("no rdma_cm event within " + EVENT_WAIT_MS + " ms, expected " + RdmaCm.eventName(type));
        }
        return expectEvent(RdmaCm.nextEvent(channel), type);
    }

    private static RdmaCm.Event expectEvent(RdmaCm.Event e, int type) {
        assertThat(e).as("rdma_get_cm_event").isNotNull();
        if (e.type() != type) {
            fail("expected " + RdmaCm.eventName(type) + ", got " + e.describe());
        }
        return e;
    }

    private static void check(String call, int rc) {
        if (rc != 0) {
            fail(call + " failed: errno " + rc);
        }
    }

    private static void expectZero(List<String> failures, String call, int rc) {
        if (rc != 0) {
            failures.add(call + " returned " + rc);
        }
    }
}
