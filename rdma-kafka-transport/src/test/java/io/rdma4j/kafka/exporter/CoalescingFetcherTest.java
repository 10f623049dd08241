package io.rdma4j.kafka.exporter;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@link CoalescingFetcher} with a fetch the test completes by hand (its seam: what the exporter gives it is Admin's
 * describeDelegationToken), or one that answers at once with the number of the fetch.
 */
class CoalescingFetcherTest {

    /** The fetches started, in order; the test completes them. */
    private final List<CompletableFuture<Integer>> started = new CopyOnWriteArrayList<>();

    private CoalescingFetcher<Integer> byHand(Duration interval) {
        return new CoalescingFetcher<>(() -> {
            CompletableFuture<Integer> f = new CompletableFuture<>();
            started.add(f);
            return f;
        }, interval);
    }

    @Test
    void aCallWhileAFetchIsInFlightGetsTheNextFetchsResult() {
        CoalescingFetcher<Integer> fetcher = byHand(Duration.ZERO);
        CompletableFuture<Integer> first = fetcher.fetchedAfterNow();
        CompletableFuture<Integer> second = fetcher.fetchedAfterNow();
        assertThat(started).as("the second call waits for the fetch in flight to end").hasSize(1);

        started.get(0).complete(1);
        assertThat(first).isCompletedWithValue(1);
        assertThat(second).as("not answered by a fetch that began before it was asked").isNotDone();
        assertThat(started).hasSize(2);

        started.get(1).complete(2);
        assertThat(second).isCompletedWithValue(2);
        assertThat(fetcher.fetches()).isEqualTo(2);
    }

    @Test
    void callersWaitingAtTheSameTimeShareOneFetch() throws Exception {
        CoalescingFetcher<Integer> fetcher = byHand(Duration.ZERO);
        CompletableFuture<Integer> first = fetcher.fetchedAfterNow();
        int callers = 16;
        ExecutorService pool = Executors.newFixedThreadPool(callers);
        try {
            CountDownLatch go = new CountDownLatch(1);
            List<Future<CompletableFuture<Integer>>> asked = new ArrayList<>();
            for (int i = 0; i < callers; i++) {
                asked.add(pool.submit(() -> {
                    go.await();
                    return fetcher.fetchedAfterNow();
                }));
            }
            go.countDown();
            List<CompletableFuture<Integer>> waiting = new ArrayList<>();
            for (Future<CompletableFuture<Integer>> a : asked) {
                waiting.add(a.get(10, TimeUnit.SECONDS));
            }
            assertThat(started).as("all %d wait for the one in flight", callers).hasSize(1);

            started.get(0).complete(1);
            assertThat(first).isCompletedWithValue(1);
            assertThat(started).as("one fetch for all of them").hasSize(2);
            assertThat(waiting).noneMatch(CompletableFuture::isDone);

            started.get(1).complete(2);
            assertThat(waiting).allSatisfy(w -> assertThat(w).isCompletedWithValue(2));
            assertThat(fetcher.fetches()).isEqualTo(2);
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aFetchWithinTheIntervalOfTheLastStartsWhenTheIntervalIsOver() {
        Duration interval = Duration.ofMillis(200);
        CoalescingFetcher<Integer> fetcher = byHand(interval);
        long before = System.nanoTime();
        CompletableFuture<Integer> first = fetcher.fetchedAfterNow();
        started.get(0).complete(1);
        assertThat(first).isCompletedWithValue(1);

        CompletableFuture<Integer> second = fetcher.fetchedAfterNow();
        assertThat(started).as("nothing in flight, but the last fetch started under %s ago", interval).hasSize(1);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (started.size() < 2) {
            assertThat(System.nanoTime()).as("the second fetch started within 10 s").isLessThan(deadline);
            Thread.onSpinWait();
        }
        assertThat(Duration.ofNanos(System.nanoTime() - before)).isGreaterThanOrEqualTo(interval);
        started.get(1).complete(2);
        assertThat(second.join()).isEqualTo(2);
    }

    @Test
    void callersAskingAsFastAsTheyCanStartAtMostOneFetchPerIntervalEachAnsweredByALaterOne() throws Exception {
        Duration interval = Duration.ofMillis(100);
        AtomicInteger fetchNumber = new AtomicInteger();
        CoalescingFetcher<Integer> fetcher = new CoalescingFetcher<>(
                () -> CompletableFuture.completedFuture(fetchNumber.incrementAndGet()), interval);
        int callers = 8;
        AtomicInteger answered = new AtomicInteger();
        List<String> stale = new CopyOnWriteArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(callers);
        long start = System.nanoTime();
        long end = start + TimeUnit.MILLISECONDS.toNanos(700);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int i = 0; i < callers; i++) {
                done.add(pool.submit(() -> {
                    while (System.nanoTime() - end < 0) {
                        int startedBefore = fetchNumber.get();
                        int result = fetcher.fetchedAfterNow().join();
                        if (result <= startedBefore) {
                            stale.add("fetch " + result + " after " + startedBefore + " had started");
                        }
                        answered.incrementAndGet();
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(20, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        long elapsed = System.nanoTime() - start;
        assertThat(stale).as("answers from a fetch that had started before the call").isEmpty();
        assertThat(fetcher.fetches()).as("fetches in %d ms at one per %s", TimeUnit.NANOSECONDS.toMillis(elapsed), interval)
                .isEqualTo(fetchNumber.get())
                .isLessThanOrEqualTo(elapsed / interval.toNanos() + 1)
                .isGreaterThanOrEqualTo(3);
        assertThat((long) answered.get()).as("calls answered").isGreaterThan(fetcher.fetches());
    }

    @Test
    void aFailedFetchFailsEachOfItsCallersAndTheNextCallFetchesAgain() {
        CoalescingFetcher<Integer> fetcher = byHand(Duration.ZERO);
        CompletableFuture<Integer> first = fetcher.fetchedAfterNow();
        CompletableFuture<Integer> second = fetcher.fetchedAfterNow();
        CompletableFuture<Integer> third = fetcher.fetchedAfterNow();
        started.get(0).complete(1);
        assertThat(first).isCompletedWithValue(1);
        IOException brokerGone = new IOException("broker gone");
        started.get(1).completeExceptionally(brokerGone);
        for (CompletableFuture<Integer> waiter : List.of(second, third)) {
            assertThatThrownBy(waiter::join).hasCause(brokerGone);
        }
        assertThat(started).as("a failure starts nothing by itself").hasSize(2);

        CompletableFuture<Integer> fourth = fetcher.fetchedAfterNow();
        assertThat(started).hasSize(3);
        started.get(2).complete(3);
        assertThat(fourth).isCompletedWithValue(3);
    }

    @Test
    void theLastValueFetchedIsRecentWithTheTimeItsFetchStartedUntilItIsTooOldAndAFailureKeepsIt() {
        CoalescingFetcher<Integer> fetcher = byHand(Duration.ZERO);
        assertThat(fetcher.recent(Duration.ofHours(1))).as("nothing fetched yet").isNull();
        long before = System.nanoTime();
        CompletableFuture<Integer> first = fetcher.fetchedAfterNow();
        assertThat(fetcher.recent(Duration.ofHours(1))).as("a fetch in flight is no value").isNull();
        started.get(0).complete(1);
        assertThat(first).isCompletedWithValue(1);

        CoalescingFetcher.Recent<Integer> recent = fetcher.recent(Duration.ofHours(1));
        assertThat(recent.value()).isEqualTo(1);
        assertThat(recent.startedNanos()).as("when the fetch started, not when it ended").isBetween(before, System.nanoTime());
        assertThat(fetcher.fetches()).as("recent() fetches nothing").isEqualTo(1);
        assertThat(fetcher.recent(Duration.ZERO)).as("older than no time at all").isNull();

        CompletableFuture<Integer> second = fetcher.fetchedAfterNow();
        started.get(1).completeExceptionally(new IOException("broker gone"));
        assertThat(second).isCompletedExceptionally();
        assertThat(fetcher.recent(Duration.ofHours(1)).value()).as("the last value fetched, not the failure").isEqualTo(1);
    }

    @Test
    void aFetchThatThrowsFailsItsCallersAndTheNextCallFetchesAgain() {
        AtomicInteger calls = new AtomicInteger();
        CoalescingFetcher<Integer> fetcher = new CoalescingFetcher<>(() -> {
            if (calls.incrementAndGet() == 1) {
                throw new IllegalStateException("admin client closed");
            }
            return CompletableFuture.completedFuture(calls.get());
        }, Duration.ZERO);
        assertThatThrownBy(() -> fetcher.fetchedAfterNow().join()).hasCauseInstanceOf(IllegalStateException.class);
        assertThat(fetcher.fetchedAfterNow().join()).isEqualTo(2);
    }
}
