package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.RdmaBindings;
import io.rdma4j.nativeloader.bindings.ibv_context;
import io.rdma4j.nativeloader.bindings.ibv_context_ops;
import io.rdma4j.nativeloader.bindings.ibv_cq;
import io.rdma4j.nativeloader.bindings.ibv_qp;
import io.rdma4j.nativeloader.bindings.rdma_cm_id;
import io.rdma4j.nativeloader.bindings.sockaddr_in;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Proves the inline-verbs facade dispatches through {@code context->ops} exactly like the C inlines:
 * a fake ibv_context whose ops are Java upcall stubs records which op was called with which arguments.
 * No RDMA device is needed.
 */
class VerbsOpsTest {

    static final List<String> CALLS = new ArrayList<>();

    static int postSend(MemorySegment qp, MemorySegment wr, MemorySegment bad) {
        CALLS.add("post_send " + qp.address() + " " + wr.address() + " " + bad.address());
        return 11;
    }

    static int postRecv(MemorySegment qp, MemorySegment wr, MemorySegment bad) {
        CALLS.add("post_recv " + qp.address() + " " + wr.address() + " " + bad.address());
        return 12;
    }

    static int pollCq(MemorySegment cq, int n, MemorySegment wc) {
        CALLS.add("poll_cq " + cq.address() + " " + n + " " + wc.address());
        return 3;
    }

    static int reqNotifyCq(MemorySegment cq, int solicited) {
        CALLS.add("req_notify_cq " + cq.address() + " " + solicited);
        return 0;
    }

    Arena arena;
    MemorySegment context;
    MemorySegment qp;
    MemorySegment cq;

    MemorySegment stub(String name, FunctionDescriptor d) throws Exception {
        var mh = MethodHandles.lookup().findStatic(VerbsOpsTest.class, name, d.toMethodType());
        return Linker.nativeLinker().upcallStub(mh, d, arena);
    }

    @BeforeEach
    void fakeProvider() throws Exception {
        CALLS.clear();
        arena = Arena.ofAuto();
        context = arena.allocate(ibv_context.layout());
        MemorySegment ops = ibv_context.ops(context);
        ibv_context_ops.post_send(ops, stub("postSend", ibv_context_ops.post_send.descriptor()));
        ibv_context_ops.post_recv(ops, stub("postRecv", ibv_context_ops.post_recv.descriptor()));
        ibv_context_ops.poll_cq(ops, stub("pollCq", ibv_context_ops.poll_cq.descriptor()));
        ibv_context_ops.req_notify_cq(ops, stub("reqNotifyCq", ibv_context_ops.req_notify_cq.descriptor()));
        qp = arena.allocate(ibv_qp.layout());
        ibv_qp.context(qp, context);
        cq = arena.allocate(ibv_cq.layout());
        ibv_cq.context(cq, context);
    }

    @Test
    void dispatchesEachInlineVerbThroughItsOwnOp() {
        MemorySegment wr = arena.allocate(64);
        MemorySegment bad = arena.allocate(8);
        MemorySegment wc = arena.allocate(256);
        // zero-length views, as returned by native calls, must work too
        MemorySegment rawQp = MemorySegment.ofAddress(qp.address());
        MemorySegment rawCq = MemorySegment.ofAddress(cq.address());

        VerbsOps.QueuePairOps qpOps = VerbsOps.ofQueuePair(rawQp);
        VerbsOps.CompletionQueueOps cqOps = VerbsOps.ofCompletionQueue(rawCq);

        assertThat(qpOps.postSend(wr, bad)).isEqualTo(11);
        assertThat(qpOps.postRecv(wr, bad)).isEqualTo(12);
        assertThat(cqOps.poll(4, wc)).isEqualTo(3);
        assertThat(cqOps.requestNotify(true)).isZero();
        assertThat(cqOps.requestNotify(false)).isZero();

        assertThat(CALLS).containsExactly(
                "post_send " + qp.address() + " " + wr.address() + " " + bad.address(),
                "post_recv " + qp.address() + " " + wr.address() + " " + bad.address(),
                "poll_cq " + cq.address() + " 4 " + wc.address(),
                "req_notify_cq " + cq.address() + " 1",
                "req_notify_cq " + cq.address() + " 0");
    }

    @Test
    void missingOpIsAnExceptionNotACrash() {
        ibv_context_ops.poll_cq(ibv_context.ops(context), MemorySegment.NULL);
        assertThatThrownBy(() -> VerbsOps.ofCompletionQueue(cq))
                .isInstanceOf(UnsupportedOperationException.class)
                .hasMessageContaining("no ibv_context_ops entry");
        ibv_context_ops.post_recv(ibv_context.ops(context), MemorySegment.NULL);
        assertThatThrownBy(() -> VerbsOps.ofQueuePair(qp))
                .isInstanceOf(UnsupportedOperationException.class)
                .hasMessageContaining("no ibv_context_ops entry");
    }

    @Test
    void offsetsComeFromTheLayouts() {
        assertThat(VerbsOps.qpContext(qp).address()).isEqualTo(context.address());
        assertThat(VerbsOps.cqContext(cq).address()).isEqualTo(context.address());
        long viaPath = ibv_context.layout().byteOffset(groupElement("ops"), groupElement("post_send"));
        assertThat(VerbsOps.op(context, viaPath).address())
                .isEqualTo(ibv_context_ops.post_send(ibv_context.ops(context)).address());
    }

    @Test
    void rdmaCmAddressesPointIntoTheRoute() {
        MemorySegment id = arena.allocate(rdma_cm_id.layout());
        MemorySegment local = RdmaCmOps.localAddress(MemorySegment.ofAddress(id.address()));
        MemorySegment peer = RdmaCmOps.peerAddress(id);
        sockaddr_in.sin_family(local, (short) RdmaBindings.AF_INET());
        sockaddr_in.sin_port(local, (short) 0x1234);
        sockaddr_in.sin_family(peer, (short) RdmaBindings.AF_INET6());
        long src = rdma_cm_id.layout().byteOffset(groupElement("route"), groupElement("addr"));
        assertThat(local.address() - id.address()).isEqualTo(src);
        assertThat(peer.address() - local.address()).isEqualTo(128); // sizeof(struct sockaddr_storage)
        assertThat(sockaddr_in.sin_port(id.asSlice(src))).isEqualTo((short) 0x1234);
        assertThat(sockaddr_in.sin_family(id.asSlice(src + 128))).isEqualTo((short) 10);
    }

}
