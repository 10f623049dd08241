package io.rdma4j.nativeloader;

import io.rdma4j.nativeloader.bindings.ibv_context;
import io.rdma4j.nativeloader.bindings.ibv_context_ops;
import io.rdma4j.nativeloader.bindings.ibv_cq;
import io.rdma4j.nativeloader.bindings.ibv_qp;
import io.rdma4j.nativeloader.bindings.ibv_recv_wr;
import io.rdma4j.nativeloader.bindings.ibv_sge;
import io.rdma4j.nativeloader.bindings.ibv_srq;
import io.rdma4j.nativeloader.bindings.ibv_wc;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What {@link SharedReceiveQueue} hands to the provider's {@code post_srq_recv}, through a fake ibv_context whose
 * op is a Java upcall decoding the work request with the generated layouts, and the argument checks of the SRQ
 * calls that fail before any native call. No RDMA device is needed.
 */
class SharedReceiveQueueTest {

    static final Queue<String> POSTED = new ConcurrentLinkedQueue<>();

    static int postSrqRecv(MemorySegment srq, MemorySegment wr, MemorySegment bad) {
        MemorySegment w = wr.reinterpret(ibv_recv_wr.sizeof());
        MemorySegment sge = ibv_recv_wr.sg_list(w).reinterpret(ibv_sge.sizeof());
        POSTED.add("srq=" + srq.address() + " id=" + ibv_recv_wr.wr_id(w) + " next=" + ibv_recv_wr.next(w).address()
                + " sges=" + ibv_recv_wr.num_sge(w) + " addr=" + ibv_sge.addr(sge) + " len=" + ibv_sge.length(sge)
                + " lkey=" + ibv_sge.lkey(sge) + " bad=" + bad.address());
        return 0;
    }

    static int pollCq(MemorySegment cq, int n, MemorySegment wc) {
        MemorySegment e = wc.reinterpret(ibv_wc.sizeof());
        ibv_wc.wr_id(e, 5);
        ibv_wc.qp_num(e, 0x11223);
        return 1;
    }

    static int reqNotifyCq(MemorySegment cq, int solicited) {
        return 0;
    }

    Arena arena;
    MemorySegment context;
    MemorySegment srq;

    MemorySegment stub(String name, FunctionDescriptor d) throws Exception {
        var mh = MethodHandles.lookup().findStatic(SharedReceiveQueueTest.class, name, d.toMethodType());
        return Linker.nativeLinker().upcallStub(mh, d, arena);
    }

    @BeforeEach
    void fakeProvider() throws Exception {
        POSTED.clear();
        arena = Arena.ofAuto();
        context = arena.allocate(ibv_context.layout());
        MemorySegment ops = ibv_context.ops(context);
        ibv_context_ops.post_srq_recv(ops, stub("postSrqRecv", ibv_context_ops.post_srq_recv.descriptor()));
        ibv_context_ops.poll_cq(ops, stub("pollCq", ibv_context_ops.poll_cq.descriptor()));
        ibv_context_ops.req_notify_cq(ops, stub("reqNotifyCq", ibv_context_ops.req_notify_cq.descriptor()));
        srq = arena.allocate(ibv_srq.layout());
        ibv_srq.context(srq, context);
    }

    @Test
    void slotsCoverTheBufferCarryTheTagAndPostThroughTheSrqsOwnOp() {
        MemorySegment buffer = arena.allocate(4 * 64);
        // a zero-length view, as ibv_create_srq's result is before reinterpret, must work too
        VerbsOps.SharedReceiveQueueOps ops = VerbsOps.ofSharedReceiveQueue(MemorySegment.ofAddress(srq.address()));
        SharedReceiveQueue q = new SharedReceiveQueue(ops, arena, buffer, 4, 64, 99, 1L << 62);
        assertThat(q.slots()).isEqualTo(4);
        assertThat(q.post(3)).isZero();
        assertThat(q.post(0)).isZero();
        List<String> posted = new ArrayList<>(POSTED);
        assertThat(posted).hasSize(2);
        assertThat(posted.get(0)).startsWith("srq=" + srq.address() + " id=" + ((1L << 62) | 3) + " next=0 sges=1 addr="
                + (buffer.address() + 192) + " len=64 lkey=99 bad=");
        assertThat(posted.get(1)).startsWith("srq=" + srq.address() + " id=" + (1L << 62) + " next=0 sges=1 addr="
                + buffer.address() + " len=64 lkey=99 bad=");
        assertThat(bad(posted.get(0))).isNotEqualTo(bad(posted.get(1)));
        assertThatThrownBy(() -> q.post(4)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> q.post(-1)).isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void severalThreadsRepostTheirOwnSlotsConcurrently() throws Exception {
        int threads = 4;
        int slotsPerThread = 8;
        int rounds = 200;
        MemorySegment buffer = arena.allocate(threads * slotsPerThread * 32L);
        SharedReceiveQueue q = new SharedReceiveQueue(VerbsOps.ofSharedReceiveQueue(srq), arena, buffer,
                threads * slotsPerThread, 32, 7, 0);
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> posters = new ArrayList<>();
        Queue<Integer> failures = new ConcurrentLinkedQueue<>();
        for (int t = 0; t < threads; t++) {
            int first = t * slotsPerThread;
            posters.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
                for (int r = 0; r < rounds; r++) {
                    for (int s = first; s < first + slotsPerThread; s++) {
                        if (q.post(s) != 0) {
                            failures.add(s);
                        }
                    }
                }
            }));
        }
        start.countDown();
        for (Thread t : posters) {
            t.join();
        }
        assertThat(failures).isEmpty();
        assertThat(POSTED).hasSize(threads * slotsPerThread * rounds);
        Set<String> distinct = new HashSet<>();
        for (String p : POSTED) {
            long id = Long.parseLong(p.replaceAll(".* id=(\\d+) .*", "$1"));
            assertThat(p).contains(" addr=" + (buffer.address() + id * 32) + " len=32 lkey=7 ");
            distinct.add(p);
        }
        assertThat(distinct).as("one work request per slot, each with its own bad_wr").hasSize(threads * slotsPerThread);
    }

    @Test
    void constructionIsCheckedOnce() {
        VerbsOps.SharedReceiveQueueOps ops = VerbsOps.ofSharedReceiveQueue(srq);
        MemorySegment buffer = arena.allocate(4 * 64);
        assertThatThrownBy(() -> new SharedReceiveQueue(ops, arena, buffer, 5, 64, 1, 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fewer than 5 slots");
        assertThatThrownBy(() -> new SharedReceiveQueue(ops, arena, buffer, 0, 64, 1, 0))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new SharedReceiveQueue(ops, arena, buffer, 4, 64, 1, 2))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps the slot numbers");
        new SharedReceiveQueue(ops, arena, buffer, 4, 64, 1, 4);
        new SharedReceiveQueue(ops, arena, buffer, 1, 64, 1, 1);
        try (Arena confined = Arena.ofConfined()) {
            assertThatThrownBy(() -> new SharedReceiveQueue(ops, confined, buffer, 4, 64, 1, 0))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must not be confined");
        }
    }

    @Test
    void missingOpIsAnExceptionNotACrash() {
        ibv_context_ops.post_srq_recv(ibv_context.ops(context), MemorySegment.NULL);
        assertThatThrownBy(() -> VerbsOps.ofSharedReceiveQueue(srq))
                .isInstanceOf(UnsupportedOperationException.class)
                .hasMessageContaining("no ibv_context_ops entry");
    }

    @Test
    void aCompletionNamesTheQueuePairItCameIn() {
        MemorySegment cq = arena.allocate(ibv_cq.layout());
        ibv_cq.context(cq, context);
        Completions c = new Completions(VerbsOps.ofCompletionQueue(cq), arena, 2);
        assertThat(c.poll()).isEqualTo(1);
        assertThat(c.wrId(0)).isEqualTo(5);
        assertThat(c.qpNum(0)).isEqualTo(0x11223);
        MemorySegment qp = arena.allocate(ibv_qp.layout());
        ibv_qp.qp_num(qp, 0x11223);
        assertThat(Verbs.queuePairNumber(MemorySegment.ofAddress(qp.address()))).isEqualTo(0x11223);
    }

    @Test
    void srqArgumentsAreCheckedBeforeAnyNativeCall() {
        assertThatThrownBy(() -> Verbs.createSharedReceiveQueue(MemorySegment.NULL, 0, 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least 1 work request");
        assertThatThrownBy(() -> Verbs.createSharedReceiveQueue(MemorySegment.NULL, 8, 9))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("outside 0..8");
        assertThatThrownBy(() -> Verbs.createSharedReceiveQueue(MemorySegment.NULL, 8, -1))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> RdmaCm.createQueuePair(MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL, 4,
                MemorySegment.NULL)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("needs the SRQ");
    }

    private static String bad(String posted) {
        return posted.substring(posted.indexOf(" bad="));
    }
}
