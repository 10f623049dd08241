package io.rdma4j.testsupport.kafka;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/** {@link BoundedSteps}, with steps that finish, throw, or block until released. */
class BoundedStepsTest {

    @Test
    void stepsRunInOrderOnAThreadOfTheirOwn() throws Exception {
        List<String> ran = new CopyOnWriteArrayList<>();
        new BoundedSteps("bounded-test", Duration.ofSeconds(10), t -> false)
                .step("first", () -> ran.add("first on " + Thread.currentThread().getName()))
                .step("second", () -> ran.add("second on " + Thread.currentThread().getName()))
                .run("unused");
        assertThat(ran).containsExactly("first on bounded-test", "second on bounded-test");
    }

    @Test
    void aStepsOwnExceptionComesBackAsItIsAndLaterStepsDoNotRun() {
        IOException failure = new IOException("disk full");
        List<String> ran = new CopyOnWriteArrayList<>();
        assertThatThrownBy(() -> new BoundedSteps("bounded-test", Duration.ofSeconds(10), t -> false)
                .step("fails", () -> {
                    throw failure;
                })
                .step("after", () -> ran.add("after"))
                .run("unused")).isSameAs(failure);
        assertThat(ran).isEmpty();
    }

    @Test
    void aStepThatHangsFailsTheRunNamingItWithTheStuckStackAndTheThreadsAskedFor() throws Exception {
        CountDownLatch never = new CountDownLatch(1);
        CountDownLatch interrupted = new CountDownLatch(1);
        List<String> ran = new CopyOnWriteArrayList<>();
        Thread bystander = Thread.ofPlatform().name("bystander-worker").daemon().start(() -> blockUntilReleased(never, null));
        try {
            long start = System.nanoTime();
            TimeoutException timedOut = catchThrowableOfType(TimeoutException.class, () ->
                    new BoundedSteps("bounded-hanging-test", Duration.ofMillis(300), t -> t.getName().startsWith("bystander"))
                            .step("quick", () -> ran.add("quick"))
                            .step("hanging", () -> blockUntilReleased(never, interrupted))
                            .step("never reached", () -> ran.add("never reached"))
                            .run("raise the limit if the machine is slow"));
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(10));

            assertThat(timedOut).hasMessageStartingWith("hanging did not finish within 300 ms")
                    .hasMessageContaining("bounded-hanging-test").hasMessageEndingWith("raise the limit if the machine is slow");
            assertThat(timedOut.getCause()).hasMessageStartingWith("thread bounded-hanging-test (WAITING)");
            assertThat(Arrays.stream(timedOut.getCause().getStackTrace()).map(StackTraceElement::getMethodName))
                    .contains("blockUntilReleased");
            assertThat(timedOut.getSuppressed()).singleElement().satisfies(s -> {
                assertThat(s).hasMessageStartingWith("thread bystander-worker");
                assertThat(Arrays.stream(s.getStackTrace()).map(StackTraceElement::getMethodName)).contains("blockUntilReleased");
            });
            assertThat(interrupted.await(10, TimeUnit.SECONDS)).as("the stuck step was interrupted").isTrue();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                if (t.getName().equals("bounded-hanging-test")) {
                    t.join(10_000);
                }
            }
            assertThat(ran).as("steps run, the step after the stuck one not even once it returned").containsExactly("quick");
        } finally {
            never.countDown();
            bystander.join(10_000);
        }
    }

    /** Waits for {@code release}; counts down {@code interrupted} when interrupted instead. */
    private static void blockUntilReleased(CountDownLatch release, CountDownLatch interrupted) {
        try {
            release.await();
        } catch (InterruptedException e) {
            if (interrupted != null) {
                interrupted.countDown();
            }
        }
    }
}
