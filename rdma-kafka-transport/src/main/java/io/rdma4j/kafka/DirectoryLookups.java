package io.rdma4j.kafka;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BiFunction;
import java.util.function.LongSupplier;

/**
 * The segment directory lookups a fetch asks an exporter for, some sent ahead: a new consumer has a lookup to make for
 * every partition before its first bytes, each a round trip to an exporter process (1-5 ms on a loaded 2-core
 * machine, where a busy exporter waits for a CPU), and made one partition after another they delayed its first
 * records by tens of ms. Sent together, they overlap. Each reply carries the partition's watermark as the directory
 * was made, which serves the fetch as a watermark READ would have (from an exporter that does not send it, the READ
 * follows the reply). At most
 * one lookup per partition is held; it serves the fetch only when that asks the same connection from the same
 * offset, and is dropped with its partition. Its watermark serves only the cursor made from it, and only while younger
 * than {@link SegmentLocator#WATERMARK_REUSE}; otherwise the watermark is read when asked.
 *
 * <p>A new consumer's connections are often ready before its positions, which wait for the internal consumer's offset
 * reset ({@code ListOffsets}). Its lookups then go out for where the reset is expected to go
 * ({@link SegmentDirectory.Request#EARLIEST}, {@link SegmentDirectory.Request#LATEST}), and the exporter answers from
 * its log start or high watermark: the reply serves the fetch when the position turns out to be the offset it
 * resolved to, sparing the round trip after the reset; otherwise the fetch asks again. Used by the polling thread only.
 */
final class DirectoryLookups {

    /**
     * A lookup sent ahead: its reply parsed once, as it arrives (the polling thread and the watermark's callback both use
     * it, so neither may read a shared buffer); {@code watermark} completes with null where it could not be read (it is
     * then read when asked).
     */
    private record Ahead(RdmaConnection connection, long fromOffset, CompletableFuture<SegmentDirectory.Response> reply,
                         CompletableFuture<Watermark> watermark, long sentNanos) {
    }

    /** A held lookup's watermark, once its reply made the partition's cursor. */
    private record WatermarkAhead(RdmaConnection connection, RegionDescriptor region, CompletableFuture<Watermark> watermark,
                                  long sentNanos) {
    }

    /** Reads a watermark record without waiting ({@link ExporterReads#watermarkAhead}). */
    private final BiFunction<RdmaConnection, RegionDescriptor, CompletableFuture<Watermark>> readWatermark;
    private final LongSupplier clock;
    private final Map<TopicPartition, Ahead> ahead = new HashMap<>();
    /** What {@link #resolved} says of a reply that serves no offset: equal to no position nor sentinel. */
    private static final long UNRESOLVED = Long.MIN_VALUE;
    private final Map<TopicPartition, WatermarkAhead> watermarks = new HashMap<>();
    /** Lookups sent, ahead or not. */
    final LongAdder sent = new LongAdder();

    DirectoryLookups(BiFunction<RdmaConnection, RegionDescriptor, CompletableFuture<Watermark>> readWatermark, LongSupplier clock) {
        this.readWatermark = readWatermark;
        this.clock = clock;
    }

    /**
     * Sends the lookup of {@code tp} from {@code fromOffset} (an offset, or where an offset reset goes) on {@code c}
     * unless one that may serve it is held already: the same, or one for a reset not answered yet or answered at
     * {@code fromOffset}.
     */
    void sendAhead(RdmaConnection c, TopicPartition tp, long fromOffset) {
        Ahead held = ahead.get(tp);
        if (held != null && held.connection == c && (held.fromOffset == fromOffset || fromOffset >= 0 && held.fromOffset < 0
                && (!held.reply.isDone() || resolved(held) == fromOffset))) {
            return;
        }
        long sentNanos = clock.getAsLong(); // before the request: the watermark its reply carries is no older
        CompletableFuture<SegmentDirectory.Response> reply;
        try {
            reply = c.request(RequestTypes.KAFKA_DIRECTORY, request(tp, fromOffset)).thenApply(SegmentDirectory.Response::fromBytes);
        } catch (RdmaException e) {
            ahead.remove(tp);
            return; // the connection failed meanwhile: the fetch finds out, and looks up anew
        }
        sent.increment();
        CompletableFuture<Watermark> watermark = reply.thenCompose(r -> {
            if (r.status() != SegmentDirectory.Status.OK) {
                return CompletableFuture.<Watermark>completedFuture(null);
            }
            return r.watermark() != null ? CompletableFuture.completedFuture(r.watermark()) : readWatermark.apply(c, r.watermarkRegion());
        }).exceptionally(e -> null); // a failed or malformed reply fails the fetch that uses it, below
        ahead.put(tp, new Ahead(c, fromOffset, reply, watermark, sentNanos));
    }

    /**
     * The directory of {@code tp} from {@code fromOffset}: the reply to the lookup sent ahead if it matches (for a
     * reset, once its reply says where it resolved; it was sent before any lookup asked now would be), else asked now.
     */
    SegmentDirectory.Response lookUp(RdmaConnection c, TopicPartition tp, long fromOffset) {
        Ahead held = ahead.remove(tp);
        watermarks.remove(tp);
        boolean serves = held != null && held.connection == c
                && (held.fromOffset == fromOffset || fromOffset >= 0 && held.fromOffset < 0 && resolved(held) == fromOffset);
        if (!serves) {
            sent.increment();
            long sentNanos = clock.getAsLong();
            SegmentDirectory.Response r = SegmentDirectory.Response.fromBytes(c.requestAndWait(RequestTypes.KAFKA_DIRECTORY,
                    request(tp, fromOffset)));
            if (r.status() == SegmentDirectory.Status.OK && r.watermark() != null) {
                watermarks.put(tp, new WatermarkAhead(c, r.watermarkRegion(), CompletableFuture.completedFuture(r.watermark()), sentNanos));
            }
            return r;
        }
        SegmentDirectory.Response r;
        try {
            r = held.reply.get(); // by the connection's operation timeout at the latest
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RdmaException("interrupted while waiting for the directory of " + tp + " on " + c, e);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            while (cause instanceof CompletionException && cause.getCause() != null) {
                cause = cause.getCause();
            }
            throw cause instanceof RuntimeException re ? re : new RdmaException(String.valueOf(cause), cause);
        }
        if (r.status() == SegmentDirectory.Status.OK) {
            watermarks.put(tp, new WatermarkAhead(c, r.watermarkRegion(), held.watermark, held.sentNanos));
        }
        return r;
    }

    /**
     * The offset the reply to {@code held} serves from, waiting for it (by the connection's operation timeout at the
     * latest); {@link #UNRESOLVED} when it failed, is malformed, is not OK or says no offset.
     */
    private static long resolved(Ahead held) {
        try {
            SegmentDirectory.Response r = held.reply.get();
            long offset = r.status() == SegmentDirectory.Status.OK ? SegmentDirectory.Request.resolve(held.fromOffset, r.watermark()) : -1;
            return offset >= 0 ? offset : UNRESOLVED;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return UNRESOLVED;
        } catch (ExecutionException | RuntimeException e) {
            return UNRESOLVED; // asked again, which fails the fetch if the connection did
        }
    }

    /**
     * The watermark in {@code region} read ahead with the lookup that made {@code tp}'s cursor, or null: none, another
     * region or connection, too old, or not read.
     */
    Watermark watermarkAhead(RdmaConnection c, TopicPartition tp, RegionDescriptor region) {
        WatermarkAhead w = watermarks.remove(tp);
        if (w == null || w.connection != c || !w.region.equals(region)
                || clock.getAsLong() - w.sentNanos >= SegmentLocator.WATERMARK_REUSE.toNanos()) {
            return null;
        }
        try {
            return w.watermark.get(); // never fails: a READ that did completes with null
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RdmaException("interrupted while waiting for the watermark of " + tp + " on " + c, e);
        } catch (ExecutionException e) {
            return null;
        }
    }

    /** Drops what is held for partitions not in {@code assigned}; replies still to come are left unread. */
    void retain(Set<TopicPartition> assigned) {
        ahead.keySet().retainAll(assigned);
        watermarks.keySet().retainAll(assigned);
    }

    private static ByteBuffer request(TopicPartition tp, long fromOffset) {
        return ByteBuffer.wrap(new SegmentDirectory.Request(tp.topic(), tp.partition(), fromOffset).toBytes());
    }
}
