package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Completions;
import io.rdma4j.nativeloader.VerbsOps;
import io.rdma4j.nativeloader.bindings.ibv_context;
import io.rdma4j.nativeloader.bindings.ibv_context_ops;
import io.rdma4j.nativeloader.bindings.ibv_cq;
import io.rdma4j.nativeloader.bindings.ibv_wc;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The polling policy shared by the progress thread and waiting callers, over a fake CQ whose
 * {@code poll_cq} is a Java upcall handing out queued work request ids. No RDMA device is needed.
 */
class CompletionPollingTest {

    static final ConcurrentLinkedQueue<Long> READY = new ConcurrentLinkedQueue<>();
    static final AtomicInteger NOTIFIES = new AtomicInteger();

    @SuppressWarnings("restricted") // stands in for libibverbs: its upcalls see raw completion memory
    static int pollCq(MemorySegment cq, int n, MemorySegment wc) {
        MemorySegment entries = wc.reinterpret(n * ibv_wc.sizeof());
        int found = 0;
        Long id;
        while (found < n && (id = READY.poll()) != null) {
            MemorySegment e = ibv_wc.asSlice(entries, found++);
            ibv_wc.wr_id(e, id);
            ibv_wc.status(e, 0);
            ibv_wc.byte_len(e, 0);
        }
        return found;
    }

    static int reqNotifyCq(MemorySegment cq, int solicited) {
        NOTIFIES.incrementAndGet();
        return 0;
    }

    Arena arena;
    Completions completions;
    final List<Long> seen = new ArrayList<>();
    final List<CompletableFuture<Void>> futures = new ArrayList<>();
    /** Stands in for the shared receive CQ: what a waiting caller's polls of it do. */
    Runnable sharedReceive = () -> { };
    final AtomicInteger sharedPolls = new AtomicInteger();

    @BeforeEach
    void fakeCq() throws Exception {
        READY.clear();
        NOTIFIES.set(0);
        arena = Arena.ofAuto();
        MemorySegment context = arena.allocate(ibv_context.layout());
        MemorySegment ops = ibv_context.ops(context);
        ibv_context_ops.poll_cq(ops, stub("pollCq", ibv_context_ops.poll_cq.descriptor()));
        ibv_context_ops.req_notify_cq(ops, stub("reqNotifyCq", ibv_context_ops.req_notify_cq.descriptor()));
        MemorySegment cq = arena.allocate(ibv_cq.layout());
        ibv_cq.context(cq, context);
        completions = new Completions(VerbsOps.ofCompletionQueue(cq), arena, 4);
    }

    @SuppressWarnings("restricted") // the fake completion queue's function pointers
    MemorySegment stub(String name, FunctionDescriptor d) throws Exception {
        var mh = MethodHandles.lookup().findStatic(CompletionPollingTest.class, name, d.toMethodType());
        return Linker.nativeLinker().upcallStub(mh, d, arena);
    }

    CompletionPolling polling(long spinNanos) {
        CompletionPolling p = new CompletionPolling(spinNanos, new CompletionPolling.Handler() {
            @Override
            public void onCompletion(long wrId, int status, int byteLength) {
                seen.add(wrId);
                futures.get((int) wrId).complete(null);
            }

            @Override
            public void onPollFailure(int result) {
                throw new AssertionError("poll failed: " + result);
            }
        }, this::pollSharedReceives);
        p.attach(completions);
        return p;
    }

    private int pollSharedReceives() {
        sharedPolls.incrementAndGet();
        sharedReceive.run();
        return 0;
    }

    @Test
    void aWaitingCallerReapsItsOwnCompletion() {
        CompletionPolling p = polling(TimeUnit.MILLISECONDS.toNanos(500));
        CompletableFuture<Void> f = new CompletableFuture<>();
        futures.add(f);
        READY.add(0L);
        assertThat(p.spin(f, System.nanoTime() + TimeUnit.SECONDS.toNanos(5))).isTrue();
        assertThat(f).isDone();
        assertThat(seen).containsExactly(0L);
        assertThat(NOTIFIES).hasValue(0);
        // it spun just now: the CQ is its callers' for a while, then the progress thread's again
        long now = System.nanoTime();
        assertThat(p.polledByCaller(now, TimeUnit.SECONDS.toNanos(1))).isTrue();
        assertThat(p.polledByCaller(now + TimeUnit.SECONDS.toNanos(2), TimeUnit.SECONDS.toNanos(1))).isFalse();
    }

    @Test
    void aWaitingCallerAlsoPollsTheSharedReceiveCqWhereItsReplyArrives() {
        CompletionPolling p = polling(TimeUnit.MILLISECONDS.toNanos(500));
        CompletableFuture<Void> reply = new CompletableFuture<>();
        sharedReceive = () -> {
            if (sharedPolls.get() == 3) {
                reply.complete(null); // the reply's receive, dispatched by the caller's poll
            }
        };
        assertThat(p.spin(reply, System.nanoTime() + TimeUnit.SECONDS.toNanos(5))).isTrue();
        assertThat(sharedPolls).hasValue(3);
        assertThat(seen).as("nothing completed on the connection's own CQ").isEmpty();
    }

    @Test
    void aCallerPastItsSpinBudgetArmsTheCqAndCountsAsBlocked() {
        CompletionPolling p = polling(TimeUnit.MICROSECONDS.toNanos(50));
        CompletableFuture<Void> never = new CompletableFuture<>();
        futures.add(never);
        assertThat(p.spin(never, System.nanoTime() + TimeUnit.SECONDS.toNanos(5))).isFalse();
        assertThat(NOTIFIES).as("armed for the progress thread").hasValue(1);
        assertThat(p.polledByCaller(System.nanoTime(), TimeUnit.SECONDS.toNanos(10)))
                .as("a blocked caller leaves the CQ to the progress thread").isFalse();
        p.unblocked();
        assertThat(p.polledByCaller(System.nanoTime(), TimeUnit.SECONDS.toNanos(10))).isTrue();
    }

    @Test
    void theProgressThreadPollsAndRunsItsCheckUnderThePollLock() {
        CompletionPolling p = polling(0);
        futures.add(new CompletableFuture<>());
        futures.add(new CompletableFuture<>());
        READY.add(0L);
        READY.add(1L);
        AtomicInteger checks = new AtomicInteger();
        assertThat(p.progress(checks::incrementAndGet)).isEqualTo(2);
        assertThat(seen).containsExactly(0L, 1L);
        assertThat(checks).hasValue(1);
        p.arm();
        assertThat(NOTIFIES).hasValue(1);
    }

    @Test
    void aHandlerThatThrowsStillLetsTheCloseCheckRunAndReleasesTheCq() {
        CompletionPolling p = new CompletionPolling(0, new CompletionPolling.Handler() {
            @Override
            public void onCompletion(long wrId, int status, int byteLength) {
                throw new IllegalStateException("handler failed on " + wrId);
            }

            @Override
            public void onPollFailure(int result) {
                throw new AssertionError("poll failed: " + result);
            }
        }, this::pollSharedReceives);
        p.attach(completions);
        READY.add(7L);
        AtomicInteger checks = new AtomicInteger();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> p.progress(checks::incrementAndGet))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("on 7");
        assertThat(checks).as("the closing connection's teardown check ran anyway").hasValue(1);
        // the poll lock was released: the next turn polls again
        assertThat(p.progress(checks::incrementAndGet)).isZero();
        assertThat(checks).hasValue(2);
    }

    @Test
    void nothingPollsATornDownCq() {
        CompletionPolling p = polling(TimeUnit.MILLISECONDS.toNanos(1));
        p.tearDown();
        READY.add(0L);
        futures.add(new CompletableFuture<>());
        AtomicInteger checks = new AtomicInteger();
        assertThat(p.progress(checks::incrementAndGet)).isZero();
        assertThat(p.spin(futures.getFirst(), System.nanoTime() + TimeUnit.SECONDS.toNanos(1))).isFalse();
        p.unblocked();
        p.arm();
        assertThat(checks).hasValue(0);
        assertThat(NOTIFIES).hasValue(0);
        assertThat(READY).containsExactly(0L);
        p.attach(completions);
        assertThat(p.progress(checks::incrementAndGet)).as("a torn-down CQ is not attached again").isZero();
    }
}
