package io.rdma4j.core.internal;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** Who completes an operation's future: never the thread that settles it (the provider's I/O thread). */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class OperationFutureTest {

    /** Runs tasks on a thread of its own and counts them. */
    private static final class CountingExecutor implements Executor {
        final AtomicInteger tasks = new AtomicInteger();

        @Override
        public void execute(Runnable task) {
            tasks.incrementAndGet();
            Thread.ofPlatform().name("completion").start(task);
        }
    }

    @Test
    void withoutAWaiterACompletionThreadCompletesItAndRunsTheCallbacks() throws Exception {
        CountingExecutor completions = new CountingExecutor();
        OperationFuture<String> f = new OperationFuture<>(null, completions, false);
        CompletableFuture<String> callbackThread = f.thenApply(v -> Thread.currentThread().getName());
        f.settle("done", null);
        assertEquals("completion", callbackThread.get(10, TimeUnit.SECONDS));
        assertEquals("done", f.get());
        assertEquals(1, completions.tasks.get());
    }

    @Test
    void aWaitingCallerCompletesItOnItsOwnThreadWithoutACompletionThread() throws Exception {
        CountingExecutor completions = new CountingExecutor();
        OperationFuture<String> f = new OperationFuture<>(null, completions, false);
        CompletableFuture<String> callbackThread = f.thenApply(v -> Thread.currentThread().getName());
        CompletableFuture<String> got = new CompletableFuture<>();
        Thread waiter = Thread.ofPlatform().name("waiter").start(() -> {
            try {
                got.complete(f.get());
            } catch (Exception e) {
                got.completeExceptionally(e);
            }
        });
        while (waiter.getState() != Thread.State.TIMED_WAITING) {
            Thread.onSpinWait();
        }
        f.settle("done", null); // on this thread, which stands for the I/O thread
        assertEquals("done", got.get(10, TimeUnit.SECONDS));
        assertEquals("waiter", callbackThread.get(10, TimeUnit.SECONDS));
        assertEquals(0, completions.tasks.get());
    }

    @Test
    void aFailureReachesTheWaiterAsTheOperationsOwnException() throws Exception {
        OperationFuture<String> f = new OperationFuture<>(null, new CountingExecutor(), false);
        IllegalStateException failure = new IllegalStateException("refused");
        f.settle(null, failure);
        ExecutionException e = assertThrows(ExecutionException.class, f::get);
        assertInstanceOf(IllegalStateException.class, e.getCause());
    }

    @Test
    void aTimedOutWaitLeavesTheFutureToTheCompletionThread() throws Exception {
        CountingExecutor completions = new CountingExecutor();
        OperationFuture<String> f = new OperationFuture<>(null, completions, false);
        assertThrows(TimeoutException.class, () -> f.get(20, TimeUnit.MILLISECONDS));
        assertFalse(f.isDone());
        f.settle("late", null);
        assertEquals("late", f.get(10, TimeUnit.SECONDS));
        assertEquals(1, completions.tasks.get()); // nobody waited when it settled
    }
}
