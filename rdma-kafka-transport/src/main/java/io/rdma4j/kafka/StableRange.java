package io.rdma4j.kafka;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.RecordBatchParser;
import org.apache.kafka.common.TopicPartition;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * What a read_committed fetch may return of the batches it read: the first {@code batches}, through {@code filter}
 * when not null; or else {@code fallback}.
 */
record StableRange(int batches, ReadCommittedFilter filter, FetchResult.Fallback fallback) {

    /**
     * For read_committed: how many of the batches read lie wholly below the last stable offset (a transaction's
     * batches start at or above it until it completes), and the filter that drops the aborted ones among them, or
     * the fallback when the exporter cannot tell the aborted transactions. Only transactional batches can be
     * aborted, so a range without one needs no request. Header fields are read before the CRC check here; every
     * batch used is checked afterwards, so a corrupt header ends in the CRC failure, not in wrong records.
     */
    static StableRange lookUp(RdmaConnection c, TopicPartition tp, List<RecordBatchParser.Batch> read,
                              long position, long lastStableOffset, LongAdder requests) {
        int stable = 0;
        long rangeEnd = position;
        boolean transactional = false;
        for (RecordBatchParser.Batch b : read) {
            if (b.lastOffset() >= lastStableOffset) {
                break;
            }
            stable++;
            if (b.lastOffset() >= position) {
                transactional |= b.isTransactional();
                rangeEnd = b.nextOffset();
            }
        }
        if (!transactional) {
            return new StableRange(stable, null, null);
        }
        AbortedTransactions.Request request = new AbortedTransactions.Request(tp.topic(), tp.partition(), position, rangeEnd);
        AbortedTransactions.Response r;
        requests.increment();
        try {
            r = AbortedTransactions.Response.fromBytes(c.requestAndWait(RequestTypes.KAFKA_ABORTED_TRANSACTIONS,
                    ByteBuffer.wrap(request.toBytes())), request);
        } catch (ProtocolException | RemoteRequestException e) {
            return new StableRange(0, null, new FetchResult.Fallback(FallbackReason.ABORTED_TRANSACTIONS,
                    "aborted transactions of " + tp + " in [" + position + ", " + rangeEnd + "): " + e));
        }
        switch (r.status()) {
            case OK -> { }
            case SEGMENTS_CHANGING -> {
                return new StableRange(0, null, new FetchResult.Fallback(FallbackReason.DIRECTORY_CHANGING,
                        "segments of " + tp + " are being replaced while its aborted transactions are looked up"));
            }
            default -> {
                return new StableRange(0, null, new FetchResult.Fallback(FallbackReason.ABORTED_TRANSACTIONS,
                        "aborted transactions of " + tp + " in [" + position + ", " + rangeEnd + "): " + r.status()));
            }
        }
        // A reply covering less than the range (more aborted transactions than one reply holds) serves the batches
        // that end below what it covers.
        int covered = 0;
        for (RecordBatchParser.Batch b : read.subList(0, stable)) {
            if (b.lastOffset() >= r.coveredUpTo()) {
                break;
            }
            covered++;
        }
        if (covered == 0 || read.get(covered - 1).lastOffset() < position) {
            return new StableRange(0, null, new FetchResult.Fallback(FallbackReason.ABORTED_TRANSACTIONS, r.transactions().size()
                    + " aborted transactions overlap offset " + position + " of " + tp + ", more than one reply holds"));
        }
        return new StableRange(covered, new ReadCommittedFilter(r.transactions()), null);
    }

}
