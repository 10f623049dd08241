package io.rdma4j.kafka.exporter;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * A value fetched after the caller asked for it, with at most one fetch started per interval: callers that ask while a
 * fetch is in flight, or while the interval since the last start runs out, share the next fetch. A fetch already in
 * flight when a caller asks does not answer it, since it may have read the source before a change the caller must see
 * (a delegation token deleted a moment ago). So peers can make the exporter describe the cluster's delegation tokens
 * at most once per interval, however fast they send proofs, and each still gets the tokens as they were after it asked.
 *
 * <p>A failed fetch fails each of its callers; the next call fetches again. Callers wait only on a fetch that is
 * started or scheduled, so none is left waiting. {@link #recent} answers, without fetching, with the last value
 * fetched and when that fetch started, for callers that may take a value a given age old.
 */
final class CoalescingFetcher<T> {

    /** A value fetched, and when ({@link System#nanoTime()}) the fetch that read it started: it is no older than that. */
    record Recent<T>(T value, long startedNanos) {
    }

    private final Supplier<? extends CompletionStage<T>> fetch;
    private final long intervalNanos;
    private final Object lock = new Object();
    /** Callers waiting for the fetch after the one in flight (or the one scheduled); null while nobody waits. */
    private CompletableFuture<T> next;
    private boolean inFlight;
    private boolean scheduled;
    private long started;
    private long lastStartNanos;
    /** The last successful fetch's value, or null. */
    private Recent<T> recent;

    CoalescingFetcher(Supplier<? extends CompletionStage<T>> fetch, Duration minInterval) {
        this.fetch = fetch;
        this.intervalNanos = minInterval.toNanos();
    }

    /** Completes with the result of a fetch started after this call, or fails with that fetch's failure. */
    CompletableFuture<T> fetchedAfterNow() {
        CompletableFuture<T> waiting;
        CompletableFuture<T> startNow = null;
        synchronized (lock) {
            if (next == null) {
                next = new CompletableFuture<>();
                waiting = next;
                if (!inFlight && !scheduled) {
                    startNow = claimOrScheduleLocked();
                }
            } else {
                waiting = next;
            }
        }
        if (startNow != null) {
            start(startNow);
        }
        // A copy: a caller that cancels or completes its future leaves the others' alone.
        return waiting.copy();
    }

    /** The last value fetched if its fetch started at most {@code maxAge} ago, else null; never fetches. */
    Recent<T> recent(Duration maxAge) {
        synchronized (lock) {
            return recent != null && System.nanoTime() - recent.startedNanos() <= maxAge.toNanos() ? recent : null;
        }
    }

    /** Fetches started so far. */
    long fetches() {
        synchronized (lock) {
            return started;
        }
    }

    /**
     * With the lock held, callers waiting and nothing in flight or scheduled: takes the waiters for a fetch the caller
     * starts at once, or, within the interval since the last start, schedules that fetch for when it ends and returns
     * null.
     */
    private CompletableFuture<T> claimOrScheduleLocked() {
        long now = System.nanoTime();
        long wait = started == 0 ? 0 : lastStartNanos + intervalNanos - now;
        if (wait > 0) {
            scheduled = true;
            CompletableFuture.delayedExecutor(wait, TimeUnit.NANOSECONDS).execute(this::startScheduled);
            return null;
        }
        CompletableFuture<T> waiters = next;
        next = null;
        inFlight = true;
        started++;
        lastStartNanos = now;
        return waiters;
    }

    private void startScheduled() {
        CompletableFuture<T> waiters;
        synchronized (lock) {
            scheduled = false;
            // A timer may fire a little early; then this schedules again.
            waiters = claimOrScheduleLocked();
        }
        if (waiters != null) {
            start(waiters);
        }
    }

    private void start(CompletableFuture<T> waiters) {
        long startedNanos;
        synchronized (lock) {
            startedNanos = lastStartNanos; // Set as this fetch was claimed; no other is claimed while it is in flight.
        }
        CompletionStage<T> result;
        try {
            result = fetch.get();
        } catch (RuntimeException e) {
            result = CompletableFuture.failedFuture(e);
        }
        result.whenComplete((value, error) -> {
            CompletableFuture<T> following = null;
            synchronized (lock) {
                inFlight = false;
                if (error == null) {
                    recent = new Recent<>(value, startedNanos);
                }
                if (next != null) {
                    following = claimOrScheduleLocked();
                }
            }
            if (error == null) {
                waiters.complete(value);
            } else {
                waiters.completeExceptionally(error instanceof CompletionException && error.getCause() != null
                        ? error.getCause() : error);
            }
            if (following != null) {
                start(following);
            }
        });
    }
}
