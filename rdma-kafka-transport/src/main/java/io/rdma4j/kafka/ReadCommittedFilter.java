package io.rdma4j.kafka;

import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.RecordBatchParser;

import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.PriorityQueue;
import java.util.Set;

/**
 * Tells, batch by batch in offset order over one fetched range, which batches a {@code read_committed} consumer
 * drops, exactly as Kafka's {@code CompletedFetch} does: aborted transactions are taken in first-offset order; once
 * a batch reaches a transaction's first offset its producer counts as aborted, until that producer's abort marker
 * passes; a transactional batch of an aborted producer is dropped. Control batches are never returned to the
 * application either way; that is the caller's part.
 */
final class ReadCommittedFilter {

    private final PriorityQueue<AbortedTransactions.Aborted> pending =
            new PriorityQueue<>(Comparator.comparingLong(AbortedTransactions.Aborted::firstOffset));
    private final Set<Long> abortedProducers = new HashSet<>();

    /** @param aborted the aborted transactions overlapping the range the batches come from */
    ReadCommittedFilter(List<AbortedTransactions.Aborted> aborted) {
        pending.addAll(aborted);
    }

    /** Whether {@code batch}, the next of the range, holds aborted records; call it once per batch, in order. */
    boolean isAborted(RecordBatchParser.Batch batch) {
        long producerId = batch.producerId();
        if (producerId < 0) {
            return false; // written without a producer id: never part of a transaction
        }
        while (!pending.isEmpty() && pending.peek().firstOffset() <= batch.lastOffset()) {
            abortedProducers.add(pending.poll().producerId());
        }
        if (batch.isAbortMarker()) {
            abortedProducers.remove(producerId);
            return false;
        }
        return batch.isTransactional() && abortedProducers.contains(producerId);
    }
}
