package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.RdmaBindings;
import io.rdma4j.nativeloader.bindings.ibv_context;
import io.rdma4j.nativeloader.bindings.ibv_context_ops;
import io.rdma4j.nativeloader.bindings.ibv_cq;
import io.rdma4j.nativeloader.bindings.ibv_qp;
import io.rdma4j.nativeloader.bindings.ibv_recv_wr;
import io.rdma4j.nativeloader.bindings.ibv_send_wr;
import io.rdma4j.nativeloader.bindings.ibv_sge;
import io.rdma4j.nativeloader.bindings.ibv_wc;
import io.rdma4j.nativeloader.bindings.rdma_cm_event;
import io.rdma4j.nativeloader.bindings.rdma_conn_param;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What {@link SendQueue}, {@link ReceiveQueue} and {@link Completions} hand to the provider and read back,
 * through a fake ibv_context whose ops are Java upcalls that decode the work requests with the generated
 * layouts (checked against gcc by LayoutOffsetsTest). No RDMA device is needed.
 */
class DataPathTest {

    static final List<String> POSTED = new ArrayList<>();
    static int pollResult;

    static int postSend(MemorySegment qp, MemorySegment wr, MemorySegment bad) {
        for (MemorySegment w = wr; !w.equals(MemorySegment.NULL); w = ibv_send_wr.next(w)) {
            w = w.reinterpret(ibv_send_wr.sizeof());
            MemorySegment sge = ibv_send_wr.sg_list(w).reinterpret(ibv_sge.sizeof());
            MemorySegment rdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(w));
            POSTED.add("send id=" + ibv_send_wr.wr_id(w) + " op=" + ibv_send_wr.opcode(w) + " flags="
                    + ibv_send_wr.send_flags(w) + " sges=" + ibv_send_wr.num_sge(w) + " addr=" + ibv_sge.addr(sge)
                    + " len=" + ibv_sge.length(sge) + " lkey=" + ibv_sge.lkey(sge) + " raddr="
                    + ibv_send_wr.wr.rdma.remote_addr(rdma) + " rkey=" + ibv_send_wr.wr.rdma.rkey(rdma));
        }
        return 0;
    }

    static int postRecv(MemorySegment qp, MemorySegment wr, MemorySegment bad) {
        MemorySegment w = wr.reinterpret(ibv_recv_wr.sizeof());
        MemorySegment sge = ibv_recv_wr.sg_list(w).reinterpret(ibv_sge.sizeof());
        POSTED.add("recv id=" + ibv_recv_wr.wr_id(w) + " next=" + ibv_recv_wr.next(w).address() + " sges="
                + ibv_recv_wr.num_sge(w) + " addr=" + ibv_sge.addr(sge) + " len=" + ibv_sge.length(sge)
                + " lkey=" + ibv_sge.lkey(sge));
        return 0;
    }

    static int pollCq(MemorySegment cq, int n, MemorySegment wc) {
        MemorySegment entries = wc.reinterpret(n * ibv_wc.sizeof());
        for (int i = 0; i < Math.min(n, pollResult); i++) {
            MemorySegment e = ibv_wc.asSlice(entries, i);
            ibv_wc.wr_id(e, 100 + i);
            ibv_wc.status(e, i);
            ibv_wc.byte_len(e, 1000 + i);
        }
        return pollResult;
    }

    static int reqNotifyCq(MemorySegment cq, int solicited) {
        POSTED.add("notify " + solicited);
        return 0;
    }

    Arena arena;
    VerbsOps.QueuePairOps qpOps;
    VerbsOps.CompletionQueueOps cqOps;

    MemorySegment stub(String name, FunctionDescriptor d) throws Exception {
        var mh = MethodHandles.lookup().findStatic(DataPathTest.class, name, d.toMethodType());
        return Linker.nativeLinker().upcallStub(mh, d, arena);
    }

    @BeforeEach
    void fakeProvider() throws Exception {
        POSTED.clear();
        arena = Arena.ofAuto();
        MemorySegment context = arena.allocate(ibv_context.layout());
        MemorySegment ops = ibv_context.ops(context);
        ibv_context_ops.post_send(ops, stub("postSend", ibv_context_ops.post_send.descriptor()));
        ibv_context_ops.post_recv(ops, stub("postRecv", ibv_context_ops.post_recv.descriptor()));
        ibv_context_ops.poll_cq(ops, stub("pollCq", ibv_context_ops.poll_cq.descriptor()));
        ibv_context_ops.req_notify_cq(ops, stub("reqNotifyCq", ibv_context_ops.req_notify_cq.descriptor()));
        MemorySegment qp = arena.allocate(ibv_qp.layout());
        ibv_qp.context(qp, context);
        MemorySegment cq = arena.allocate(ibv_cq.layout());
        ibv_cq.context(cq, context);
        qpOps = VerbsOps.ofQueuePair(qp);
        cqOps = VerbsOps.ofCompletionQueue(cq);
    }

    @Test
    void singleReadsAndWritesAreSignalledWithEveryFieldTheyChange() {
        SendQueue sq = new SendQueue(qpOps, arena);
        int read = RdmaBindings.IBV_WR_RDMA_READ();
        int write = RdmaBindings.IBV_WR_RDMA_WRITE();
        int signalled = RdmaBindings.IBV_SEND_SIGNALED();
        assertThat(sq.postRead(7, 0x1000, 64, 11, 0x2000, 22)).isZero();
        assertThat(sq.postWrite(8, 0x3000, 128, 33, 0x4000, -1)).isZero();
        assertThat(POSTED).containsExactly(
                "send id=7 op=" + read + " flags=" + signalled + " sges=1 addr=4096 len=64 lkey=11 raddr=8192 rkey=22",
                "send id=8 op=" + write + " flags=" + signalled + " sges=1 addr=12288 len=128 lkey=33 raddr=16384 rkey=-1");
    }

    @Test
    void aChainIsLinkedAndOnlyItsLastRequestSignalled() {
        SendQueue sq = new SendQueue(qpOps, arena);
        int read = RdmaBindings.IBV_WR_RDMA_READ();
        for (int i = 0; i < 3; i++) {
            sq.prepareChained(i, 3, SendQueue.RDMA_READ, 10 + i, 100 * i, 8, 5, 1000 * i, 6);
        }
        assertThat(sq.postChain()).isZero();
        assertThat(POSTED).containsExactly(
                "send id=10 op=" + read + " flags=0 sges=1 addr=0 len=8 lkey=5 raddr=0 rkey=6",
                "send id=11 op=" + read + " flags=0 sges=1 addr=100 len=8 lkey=5 raddr=1000 rkey=6",
                "send id=12 op=" + read + " flags=" + RdmaBindings.IBV_SEND_SIGNALED() + " sges=1 addr=200 len=8 lkey=5 raddr=2000 rkey=6");
        assertThatThrownBy(() -> sq.prepareChained(3, 3, SendQueue.RDMA_READ, 1, 0, 1, 0, 0, 0))
                .isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> sq.prepareChained(0, SendQueue.MAX_CHAIN + 1, SendQueue.RDMA_READ, 1, 0, 1, 0, 0, 0))
                .isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> sq.prepareChained(0, 1, RdmaBindings.IBV_WR_SEND(), 1, 0, 1, 0, 0, 0))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void aMessageIsOneSignalledSend() {
        SendQueue sq = new SendQueue(qpOps, arena);
        assertThat(sq.postSend(9, 0x5000, 20, 44)).isZero();
        assertThat(POSTED).containsExactly("send id=9 op=" + RdmaBindings.IBV_WR_SEND() + " flags="
                + RdmaBindings.IBV_SEND_SIGNALED() + " sges=1 addr=20480 len=20 lkey=44 raddr=0 rkey=0");
    }

    @Test
    void receiveSlotsCoverTheBufferAndCarryTheTag() {
        MemorySegment buffer = arena.allocate(3 * 100);
        ReceiveQueue rq = new ReceiveQueue(qpOps, arena, buffer, 3, 100, 77, 1L << 62);
        assertThat(rq.post(2)).isZero();
        assertThat(POSTED).containsExactly("recv id=" + ((1L << 62) | 2) + " next=0 sges=1 addr=" + (buffer.address() + 200)
                + " len=100 lkey=77");
        assertThatThrownBy(() -> rq.post(3)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> new ReceiveQueue(qpOps, arena, buffer, 4, 100, 77, 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fewer than 4 slots");
    }

    @Test
    void completionsAreReadInPlace() {
        Completions c = new Completions(cqOps, arena, 4);
        pollResult = 2;
        assertThat(c.poll()).isEqualTo(2);
        assertThat(c.wrId(0)).isEqualTo(100);
        assertThat(c.wrId(1)).isEqualTo(101);
        assertThat(c.status(1)).isEqualTo(1);
        assertThat(c.byteLength(1)).isEqualTo(1001);
        assertThatThrownBy(() -> c.wrId(4)).isInstanceOf(IndexOutOfBoundsException.class);
        pollResult = -5;
        assertThat(c.poll()).isEqualTo(-5);
        assertThat(c.requestNotify()).isZero();
        assertThat(POSTED).containsExactly("notify 0");
    }

    @Test
    void socketAddressesRoundTrip() throws Exception {
        InetSocketAddress a = new InetSocketAddress(InetAddress.getByName("10.1.2.3"), 4791);
        assertThat(RdmaCm.fromSockaddr(RdmaCm.sockaddr(arena, a))).isEqualTo(a);
        assertThatThrownBy(() -> RdmaCm.sockaddr(arena, new InetSocketAddress(InetAddress.getByName("::1"), 1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("IPv4");
    }

    @Test
    void connectionParametersAndEventsCarryPrivateData() {
        byte[] data = {1, 2, 3, 4};
        MemorySegment p = RdmaCm.connParam(arena, new RdmaCm.ConnectionParameters(data, 5, 6, 7, 3));
        assertThat(rdma_conn_param.private_data_len(p)).isEqualTo((byte) 4);
        assertThat(rdma_conn_param.private_data(p).reinterpret(4).toArray(ValueLayout.JAVA_BYTE)).containsExactly(data);
        assertThat(rdma_conn_param.responder_resources(p)).isEqualTo((byte) 5);
        assertThat(rdma_conn_param.initiator_depth(p)).isEqualTo((byte) 6);
        assertThat(rdma_conn_param.retry_count(p)).isEqualTo((byte) 7);
        assertThat(rdma_conn_param.rnr_retry_count(p)).isEqualTo((byte) 3);
        assertThatThrownBy(() -> new RdmaCm.ConnectionParameters(new byte[256], 1, 1, 7, 7))
                .isInstanceOf(IllegalArgumentException.class);

        MemorySegment ev = arena.allocate(rdma_cm_event.layout());
        rdma_cm_event.event(ev, RdmaCm.ESTABLISHED);
        rdma_cm_event.id(ev, MemorySegment.ofAddress(0x1234));
        rdma_cm_event.status(ev, 0);
        MemorySegment.copy(p, 0, rdma_cm_event.param.conn(rdma_cm_event.param(ev)), 0, rdma_conn_param.sizeof());
        RdmaCm.Event e = RdmaCm.read(ev);
        assertThat(e.type()).isEqualTo(RdmaCm.ESTABLISHED);
        assertThat(e.id()).isEqualTo(0x1234);
        assertThat(e.privateData()).containsExactly(data);
        assertThat(e.initiatorDepth()).isEqualTo(6);
        assertThat(e.responderResources()).isEqualTo(5);
        assertThat(e.describe()).isEqualTo("RDMA_CM_EVENT_ESTABLISHED");
    }
}
