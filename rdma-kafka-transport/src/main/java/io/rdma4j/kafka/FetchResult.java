package io.rdma4j.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/** What a fetch of one partition came to: records, or the reason RDMA cannot serve it now. */
sealed interface FetchResult permits FetchResult.Records, FetchResult.Fallback {

    /**
     * Records (possibly none) and the position after them ({@code nextOffset == position} when nothing new), with the
     * high watermark of the watermark record they were read against (for the lag metric).
     */
    record Records<K, V>(List<ConsumerRecord<K, V>> records, long nextOffset, Optional<Integer> leaderEpoch,
                         long highWatermark) implements FetchResult {
    }

    /**
     * RDMA cannot serve this partition now: why, as a metric tag and in words, and the details for logs; {@code settled},
     * when not null, completes once what RDMA waits for is done (the exporter's connection set up, or failed), which
     * ends the fallback period early.
     */
    record Fallback(FallbackReason kind, String reason, CompletableFuture<?> settled) implements FetchResult {
        Fallback(FallbackReason kind, String reason) {
            this(kind, reason, null);
        }
    }
}
