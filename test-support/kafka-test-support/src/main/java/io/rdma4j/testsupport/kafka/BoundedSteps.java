package io.rdma4j.testsupport.kafka;

import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;

/**
 * Blocking steps run one after another on a thread of their own, all within one time limit, so that a step that hangs
 * fails its caller instead of holding it until a CI or lab limit an hour away. The failure names the step that did not
 * finish; its cause carries the stuck thread's stack and its suppressed exceptions the stacks of the threads the caller
 * asked to see (the stuck thread often only waits for one of those). The same is printed to stderr when the limit
 * passes, because a test report may keep only a failure's first lines. The stuck thread is interrupted, not awaited,
 * and runs no further step.
 */
final class BoundedSteps {

    /** One step: may block, may throw. */
    @FunctionalInterface
    interface Step {
        void run() throws Exception;
    }

    private record Named(String name, Step step) {
    }

    private final String threadName;
    private final Duration limit;
    private final Predicate<Thread> alsoShow;
    private final List<Named> steps = new ArrayList<>();

    /**
     * @param threadName names the thread that runs the steps, as it appears in the stacks
     * @param alsoShow   further threads whose stacks a timeout reports (e.g. those a library names after itself)
     */
    BoundedSteps(String threadName, Duration limit, Predicate<Thread> alsoShow) {
        this.threadName = threadName;
        this.limit = limit;
        this.alsoShow = alsoShow;
    }

    /** Adds a step; {@code name} is what a timeout says did not finish. */
    BoundedSteps step(String name, Step step) {
        steps.add(new Named(name, step));
        return this;
    }

    /**
     * Runs the steps in order. A step's own exception is rethrown as it is; a step still running when the limit passes
     * fails the run with a TimeoutException whose message ends with {@code advice}.
     */
    void run(String advice) throws Exception {
        AtomicReference<String> current = new AtomicReference<>();
        AtomicBoolean abandoned = new AtomicBoolean();
        FutureTask<Void> all = new FutureTask<>(() -> {
            for (Named s : steps) {
                // A step that swallowed the interrupt returns late; what follows it would run beside the caller's cleanup.
                if (abandoned.get()) {
                    return null;
                }
                current.set(s.name());
                s.step().run();
            }
            return null;
        });
        Thread runner = Thread.ofPlatform().name(threadName).daemon().unstarted(all);
        runner.start();
        try {
            all.get(limit.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw (Error) e.getCause();
        } catch (TimeoutException e) {
            abandoned.set(true);
            TimeoutException timedOut = timedOut(runner, current.get(), advice);
            runner.interrupt();
            throw timedOut;
        } catch (InterruptedException e) {
            runner.interrupt();
            throw e;
        }
    }

    private TimeoutException timedOut(Thread runner, String stuckStep, String advice) {
        TimeoutException timedOut = new TimeoutException(stuckStep + " did not finish within " + describe(limit)
                + " (the cause is the stack of thread " + runner.getName() + " then); " + advice);
        timedOut.initCause(stackOf(runner));
        for (Map.Entry<Thread, StackTraceElement[]> t : Thread.getAllStackTraces().entrySet()) {
            if (t.getKey() != runner && alsoShow.test(t.getKey())) {
                timedOut.addSuppressed(stackOf(t.getKey(), t.getValue()));
            }
        }
        PrintStream err = System.err;
        synchronized (err) {
            err.println("[BoundedSteps] " + timedOut.getMessage());
            timedOut.printStackTrace(err);
        }
        return timedOut;
    }

    private static Throwable stackOf(Thread thread) {
        return stackOf(thread, thread.getStackTrace());
    }

    /** A Throwable that only carries another thread's stack, so that test reports print it like any cause. */
    private static Throwable stackOf(Thread thread, StackTraceElement[] stack) {
        Throwable where = new Throwable("thread " + thread.getName() + " (" + thread.getState() + ")");
        where.setStackTrace(stack);
        return where;
    }

    private static String describe(Duration d) {
        return d.toMillisPart() == 0 && d.toSeconds() > 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
    }
}
