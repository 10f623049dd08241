package io.rdma4j.kafka;

import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicAuthorizationException;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Where the next bytes of each partition lie in its exporter's memory: the segment directory looked up from the
 * consumer's position, checked against the watermark record (a newer generation, or a segment that rolled, grew or
 * was replaced, means the directory is looked up again), and the hops from a segment read to its end to the next
 * one. It reads nothing itself: it asks an {@link Exporter} for the directory and the watermark. Used by the polling
 * thread only.
 */
final class SegmentLocator {

    /** Hops through segments read to their end, or directories found stale, before a fetch gives up. */
    static final int MAX_HOPS = 4;
    /**
     * How long a watermark read for a partition serves its next fetches, as long as they find bytes below it: each read
     * is a round trip to the exporter, which on a loaded machine took about a millisecond, one per fetch of about
     * {@code max.partition.fetch.bytes}, and it tells a consumer reading a backlog nothing it needs (bytes below a
     * high watermark stay readable). A fetch that reaches its end, or needs another segment, reads it afresh. The
     * exporter itself publishes the watermark only every {@code rdma.exporter.watermark.interval.ms} (50 by default).
     */
    static final Duration WATERMARK_REUSE = Duration.ofMillis(100);
    /**
     * A partition's watermark that has not changed for this long (by this consumer's clock: the exporter stamps each
     * refresh, at most {@code rdma.exporter.watermark.interval.ms} apart, 1 s at most) says its exporter no longer
     * refreshes it: stopped, hung while its NIC still serves READs, or refused registering new log data (a
     * registered-memory limit). Bytes below its high watermark stay readable; at its end the partition goes to
     * Kafka's fetch ({@link FallbackReason#EXPORTER_STALLED}) instead of waiting for records that never come.
     */
    static final Duration WATERMARK_STALE = Duration.ofSeconds(10);

    /** What the locator asks of the exporter a partition is read from. */
    interface Exporter {

        /** The exporter's segment directory of {@code tp} from {@code fromOffset} on. */
        SegmentDirectory.Response directory(TopicPartition tp, long fromOffset);

        /** The watermark record in {@code region}, read consistently. */
        Watermark watermark(RegionDescriptor region);
    }

    /** Where a fetch of one partition reads, or why it reads nothing. */
    sealed interface Where permits Bytes, NothingNew, NotExported, LeaderElsewhere, Unreadable {
    }

    /**
     * Read {@code segment} from byte {@code position}, below {@code validEnd} (what the watermark says is written);
     * return no record at or above offset {@code end} (the high watermark, or the last stable offset).
     */
    record Bytes(SegmentDirectory.Segment segment, long position, long validEnd, long end) implements Where {
    }

    /** Nothing below {@code end} is left to read from the position. */
    record NothingNew(long end) implements Where {
    }

    /** The exporter exports no segment holding the position (what was located for the partition is forgotten). */
    record NotExported() implements Where {
    }

    /** The watermark names another leader than the one the exporter was chosen for. */
    record LeaderElsewhere(int leaderId) implements Where {
    }

    /** The exporter cannot serve the position now, for the reason given. */
    record Unreadable(FetchResult.Fallback fallback) implements Where {
    }

    private static final class Cursor {
        /** The exporter whose regions the descriptors below name. */
        final InetSocketAddress exporter;
        final RegionDescriptor watermark;
        List<SegmentDirectory.Segment> segments;
        long offset;
        long segmentBase;
        long position;
        // The watermark generation this directory was checked against; a newer one means segments were
        // replaced or deleted (compaction, retention), so the directory is looked up again.
        long generation = -1;
        /** The last watermark read for this cursor, and when ({@link #clock}); null before the first. */
        Watermark lastWatermark;
        long lastWatermarkNanos;

        Cursor(InetSocketAddress exporter, SegmentDirectory.Response r, long fromOffset) {
            this.exporter = exporter;
            this.watermark = r.watermarkRegion();
            this.segments = r.segments();
            this.offset = fromOffset;
            this.segmentBase = r.segments().getFirst().baseOffset();
            this.position = r.startPosition();
        }

        SegmentDirectory.Segment segment(long base) {
            for (SegmentDirectory.Segment s : segments) {
                if (s.baseOffset() == base) {
                    return s;
                }
            }
            return null;
        }

        SegmentDirectory.Segment after(long base) {
            for (SegmentDirectory.Segment s : segments) {
                if (s.baseOffset() > base) {
                    return s;
                }
            }
            return null;
        }
    }

    private final Map<TopicPartition, Cursor> cursors = new HashMap<>();
    /**
     * Per partition, the last refresh stamp its watermark carried and when this consumer first saw it; kept while the
     * partition stays assigned, since a fallback forgets the cursor and the stall must not be learnt again each time.
     */
    private final Map<TopicPartition, long[]> refreshSeen = new HashMap<>();
    /** {@code isolation.level=read_committed}: records end at the last stable offset rather than the high watermark. */
    private final boolean readCommitted;
    /** Told when what was located for a partition is forgotten or replaced: bytes read ahead under it are stale. */
    private final Consumer<TopicPartition> onForget;

    /** {@link System#nanoTime}, or a test's clock. */
    private final LongSupplier clock;

    SegmentLocator(boolean readCommitted, Consumer<TopicPartition> onForget) {
        this(readCommitted, onForget, System::nanoTime);
    }

    SegmentLocator(boolean readCommitted, Consumer<TopicPartition> onForget, LongSupplier clock) {
        this.readCommitted = readCommitted;
        this.onForget = onForget;
        this.clock = clock;
    }

    /** Where a fetch of {@code tp} from offset {@code position} reads, at the exporter {@code target} names. */
    Where where(TopicPartition tp, ExporterLocator.Target target, long position, Exporter exporter) {
        Cursor st = cursors.get(tp);
        if (st != null && st.offset == position && st.lastWatermark != null
                && clock.getAsLong() - st.lastWatermarkNanos < WATERMARK_REUSE.toNanos()
                && within(st, st.lastWatermark, target, tp, position, exporter) instanceof Bytes bytes) {
            return bytes;
        }
        st = cursors.get(tp); // what within() found may have moved or replaced it
        if (st != null && st.offset != position && staleMillis(tp) >= 0) {
            // Kafka's fetch moved the position past a stalled exporter's watermark: that exporter may not answer a
            // lookup (a hung process whose NIC still serves READs), so its watermark, one READ, says first whether it is back
            watermark(tp, exporter, st);
            long stale = staleMillis(tp);
            if (stale >= 0) {
                return stalled(tp, stale);
            }
        }
        if (st == null || st.offset != position) {
            st = lookUp(exporter, target, tp, position);
            if (st == null) {
                return new NotExported();
            }
        }
        Watermark w = watermark(tp, exporter, st);
        if (st.generation >= 0 && st.generation != w.generation()) {
            st = lookUp(exporter, target, tp, position);
            if (st == null) {
                return new NotExported();
            }
            w = watermark(tp, exporter, st);
        }
        return within(st, w, target, tp, position, exporter);
    }

    private Watermark watermark(TopicPartition tp, Exporter exporter, Cursor st) {
        Watermark w = exporter.watermark(st.watermark);
        st.lastWatermark = w;
        st.lastWatermarkNanos = clock.getAsLong();
        long[] seen = refreshSeen.get(tp);
        if (seen == null) {
            refreshSeen.put(tp, new long[] {w.updatedAtMillis(), st.lastWatermarkNanos});
        } else if (seen[0] != w.updatedAtMillis()) {
            seen[0] = w.updatedAtMillis();
            seen[1] = st.lastWatermarkNanos;
        }
        return w;
    }

    /** Nothing new below {@code end}, unless the exporter stopped refreshing {@code tp}'s watermark. */
    private Where atEnd(TopicPartition tp, long end) {
        long stale = staleMillis(tp);
        return stale >= 0 ? stalled(tp, stale) : new NothingNew(end);
    }

    /** How long the exporter has not refreshed {@code tp}'s watermark, in ms, when past {@link #WATERMARK_STALE}; else -1. */
    private long staleMillis(TopicPartition tp) {
        long[] seen = refreshSeen.get(tp);
        long unchanged = seen == null ? 0 : clock.getAsLong() - seen[1];
        return unchanged > WATERMARK_STALE.toNanos() ? unchanged / 1_000_000 : -1;
    }

    private Where stalled(TopicPartition tp, long staleMillis) {
        return unreadable(FallbackReason.EXPORTER_STALLED, "the exporter has not refreshed the watermark of " + tp + " for "
                + staleMillis + " ms (its log says why)");
    }

    /** Where the fetch from {@code position} reads, by {@code w}, the cursor's directory checked against it. */
    private Where within(Cursor st, Watermark w, ExporterLocator.Target target, TopicPartition tp, long position, Exporter exporter) {
        if (target.outdatedBy(w.leaderId())) {
            return new LeaderElsewhere(w.leaderId());
        }
        st.generation = w.generation();
        if (position < w.logStartOffset()) {
            return unreadable(FallbackReason.BELOW_LOG_START, "offset " + position + " is below the log start " + w.logStartOffset());
        }
        // What may be returned ends at the high watermark, or for read_committed at the last stable offset (which
        // is also what Kafka measures that consumer's lag against).
        long end = readCommitted ? w.lastStableOffset() : w.highWatermark();
        if (position >= end) {
            return atEnd(tp, end);
        }
        for (int hops = 0; hops < MAX_HOPS; hops++) {
            SegmentDirectory.Segment seg = st.segment(st.segmentBase);
            if (seg == null || seg.baseOffset() > w.hwSegmentBase()
                    || (seg.baseOffset() < w.hwSegmentBase() && !seg.complete())
                    || (seg.baseOffset() == w.hwSegmentBase() && w.hwPosition() > seg.exportedLength())) {
                // Our directory is older than the watermark: the segment rolled, grew or was replaced.
                st = lookUp(exporter, target, tp, position);
                if (st == null) {
                    return new NotExported();
                }
                seg = st.segment(st.segmentBase);
                if (seg == null || seg.baseOffset() > w.hwSegmentBase()) {
                    return unreadable(FallbackReason.NOT_EXPORTED, "no exported segment holds offset " + position + " of " + tp);
                }
            }
            long validEnd = seg.baseOffset() == w.hwSegmentBase() ? Math.min(w.hwPosition(), seg.exportedLength()) : seg.exportedLength();
            if (st.position >= validEnd) {
                if (seg.baseOffset() == w.hwSegmentBase()) {
                    return atEnd(tp, end);
                }
                SegmentDirectory.Segment next = st.after(seg.baseOffset());
                if (next == null) {
                    st.segments = List.of(); // Refresh on the next hop.
                    st.segmentBase = seg.baseOffset() + 1;
                    continue;
                }
                st.segmentBase = next.baseOffset();
                st.position = 0;
                continue;
            }
            return new Bytes(seg, st.position, validEnd, end);
        }
        return unreadable(FallbackReason.DIRECTORY_CHANGING, "segment directory of " + tp + " keeps changing");
    }

    /** The fetch from {@link Bytes} returned records up to {@code nextOffset}, ending at byte {@code nextPosition}. */
    void advance(TopicPartition tp, long nextOffset, long nextPosition) {
        Cursor st = cursors.get(tp);
        st.offset = nextOffset;
        st.position = nextPosition;
    }

    /** Whether a fetch of {@code tp} from {@code position} at {@code exporter} needs no directory lookup to start. */
    boolean locatedAt(TopicPartition tp, long position, InetSocketAddress exporter) {
        Cursor st = cursors.get(tp);
        return st != null && st.offset == position && st.exporter.equals(exporter);
    }

    /** The exporter {@code tp} was last located at, or null. */
    InetSocketAddress exporterOf(TopicPartition tp) {
        Cursor st = cursors.get(tp);
        return st == null ? null : st.exporter;
    }

    /** Forgets what was located for {@code tp}: the next fetch looks its directory up again. */
    void forget(TopicPartition tp) {
        cursors.remove(tp);
        onForget.accept(tp);
    }

    /** Forgets the partitions not in {@code assigned}. */
    void retain(Set<TopicPartition> assigned) {
        refreshSeen.keySet().retainAll(assigned);
        for (TopicPartition tp : List.copyOf(cursors.keySet())) {
            if (!assigned.contains(tp)) {
                forget(tp);
            }
        }
    }

    /** Forgets the partitions located at {@code exporter}: their descriptors may name regions of an exporter that is gone. */
    void forgetAt(InetSocketAddress exporter) {
        for (TopicPartition tp : List.copyOf(cursors.keySet())) {
            if (cursors.get(tp).exporter.equals(exporter)) {
                forget(tp);
            }
        }
    }

    private Cursor lookUp(Exporter exporter, ExporterLocator.Target target, TopicPartition tp, long fromOffset) {
        SegmentDirectory.Response r = exporter.directory(tp, fromOffset);
        if (r.status() == SegmentDirectory.Status.NOT_AUTHORIZED) {
            throw new TopicAuthorizationException(target.address() + " serves " + tp.topic() + " only to consumers that may READ it");
        }
        if (r.status() != SegmentDirectory.Status.OK || r.segments().isEmpty()) {
            forget(tp);
            return null;
        }
        Cursor st = new Cursor(target.address(), r, fromOffset);
        if (cursors.put(tp, st) != null) {
            onForget.accept(tp);
        }
        return st;
    }

    private static Unreadable unreadable(FallbackReason reason, String why) {
        return new Unreadable(new FetchResult.Fallback(reason, why));
    }
}
