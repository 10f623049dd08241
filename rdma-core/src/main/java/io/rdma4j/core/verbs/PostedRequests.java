package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Verbs;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntConsumer;

/**
 * The send-queue work requests of one connection in post order, with the ids they were posted under.
 * An RC queue pair completes in order, so a completion also completes every unsignalled request posted
 * before it. Guarded by the connection's lock.
 */
final class PostedRequests {

    /** A posted work request; {@code future} is null for credit-only messages, {@code sendSlot} -1 without one. */
    record Pending(long wrId, String operation, CompletableFuture<Void> future, int sendSlot) {
    }

    private final ArrayDeque<Pending> queue = new ArrayDeque<>();
    /** The queue's size, for threads that do not hold the lock. */
    private volatile int posted;
    private long nextWrId = 1;

    /** The id the next work request is posted under. */
    long nextId() {
        return nextWrId;
    }

    /** Records requests posted from {@link #nextId()} on, one per future. */
    void addOneSided(String operation, List<CompletableFuture<Void>> futures) {
        for (CompletableFuture<Void> f : futures) {
            queue.add(new Pending(nextWrId++, operation, f, -1));
        }
        posted = queue.size();
    }

    /** Records one request posted under {@link #nextId()}. */
    void add(String operation, CompletableFuture<Void> future, int sendSlot) {
        queue.add(new Pending(nextWrId++, operation, future, sendSlot));
        posted = queue.size();
    }

    boolean isEmpty() {
        return queue.isEmpty();
    }

    /** Without the lock: whether requests were posted and not completed, as of a moment ago. */
    boolean anyPosted() {
        return posted > 0;
    }

    /** Removes and returns the oldest request, or null. */
    Pending poll() {
        Pending p = queue.poll();
        posted = queue.size();
        return p;
    }

    /** What one send-queue completion finished: the request it names ({@code last}) and those posted before it. */
    record Completed(Pending last, List<Pending> earlier) {

        /**
         * Completes the futures: those posted before succeeded (a queue pair completes in order); the last one with
         * the completion's {@code status}, a failure naming the operation and {@code peer}.
         */
        void complete(int status, String peer) {
            for (Pending e : earlier) {
                if (e.future() != null) {
                    e.future().complete(null);
                }
            }
            if (last == null || last.future() == null) {
                return;
            }
            if (status != WorkCompletions.SUCCESS) {
                last.future().completeExceptionally(WorkCompletions.exception(status, Verbs.completionStatus(status),
                        last.operation(), peer));
            } else {
                last.future().complete(null);
            }
        }
    }

    /**
     * Removes the requests up to and including {@code wrId} (all of them when no request has that id), giving each
     * one's send slot to {@code slotFreed}: a queue pair completes in order, so the unsignalled ones before a
     * completion are done too.
     */
    Completed completeUpTo(long wrId, IntConsumer slotFreed) {
        Pending last = null;
        List<Pending> earlier = new ArrayList<>(0);
        Pending p;
        while ((p = queue.poll()) != null) {
            if (p.sendSlot() >= 0) {
                slotFreed.accept(p.sendSlot());
            }
            if (last != null) {
                earlier.add(last);
            }
            last = p;
            if (p.wrId() == wrId) {
                break;
            }
        }
        posted = queue.size();
        return new Completed(last, earlier);
    }

    /** Removes and returns everything still posted. */
    List<Pending> drain() {
        List<Pending> all = new ArrayList<>(queue);
        queue.clear();
        posted = 0;
        return all;
    }
}
