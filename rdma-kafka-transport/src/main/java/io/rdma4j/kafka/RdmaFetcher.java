package io.rdma4j.kafka;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.PooledBuffer;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.kafka.protocol.BatchHeaders;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import io.rdma4j.kafka.protocol.RecordBatchParser;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.utils.BufferSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.LongAdder;

/**
 * Reads partitions from a broker's log exporter by one-sided RDMA READ: the watermark record first, then
 * the batch range below the high watermark, parsed in place from the registered buffer
 * ({@link RecordBatchParser}); every batch's CRC32C is verified before any record of it is used.
 */
final class RdmaFetcher implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaFetcher.class);

    /** What a fetch of one partition came to. */
    sealed interface Result permits Records, Fallback {
    }

    /**
     * Records (possibly none) and the position after them ({@code nextOffset == position} when nothing new), with the
     * high watermark of the watermark record they were read against (for the lag metric).
     */
    record Records<K, V>(List<ConsumerRecord<K, V>> records, long nextOffset, Optional<Integer> leaderEpoch, long highWatermark) implements Result {
    }

    /** RDMA cannot serve this partition now: why, as a metric tag and in words, and the details for logs. */
    record Fallback(FallbackReason kind, String reason) implements Result {
    }

    private final RdmaTransport transport;
    private final ExporterLocator locator;
    private final ExporterConnections connections;
    /** A v2 batch's length field is a signed 32-bit count after the 12-byte log overhead. */
    static final long MAX_BATCH_BYTES = BatchHeaders.LOG_OVERHEAD + (long) Integer.MAX_VALUE;
    final RegisteredBufferPool pool;
    /** Working buffers of the decompression codecs, reused across batches; the fetcher runs on the consumer's thread only. */
    private final BufferSupplier decompressionBuffers = BufferSupplier.create();
    /**
     * Checks and inflates the batches of each read-ahead while the application works on the records before them
     * (one daemon thread, started on the first read-ahead), with working buffers only it uses.
     */
    private final ExecutorService decoder;
    private final BufferSupplier decoderBuffers = BufferSupplier.create();
    /** {@code fetch.max.bytes}: what may be held read ahead or left over across all partitions. */
    private final long maxBytesAhead;
    private final Map<TopicPartition, PartitionState> states = new HashMap<>();
    final LongAdder directoryRequests = new LongAdder();
    final LongAdder abortedTransactionRequests = new LongAdder();

    private static final class PartitionState {
        /** The exporter whose regions the descriptors below name. */
        InetSocketAddress exporter;
        io.rdma4j.core.RegionDescriptor watermark;
        List<SegmentDirectory.Segment> segments = List.of();
        long cursorOffset = -1;
        long cursorSegmentBase;
        long cursorPosition;
        // The watermark generation this directory was checked against; a newer one means segments were
        // replaced or deleted (compaction, retention), so the directory is looked up again.
        long generation = -1;
        /** The next bytes of the cursor's segment: in flight, or left over from the last fetch. */
        BatchRange ahead;

        void releaseAhead() {
            if (ahead != null) {
                ahead.release();
                ahead = null;
            }
        }
    }

    /** Never null: a fetcher whose counts nobody reads gets {@link RdmaFetchMetrics#detached()}. */
    private final RdmaFetchMetrics metrics;
    /**
     * {@code isolation.level=read_committed}: nothing at or above the last stable offset is returned, and aborted
     * transactions, learnt from the exporter for the range read, are dropped.
     */
    private final boolean readCommitted;

    RdmaFetcher(RdmaTransport transport, InetSocketAddress exporter, Duration reconnectBackoff) {
        this(transport, ExporterLocator.fixed(exporter), null, ExporterConnections.Timing.of(reconnectBackoff), RdmaFetchMetrics.detached(),
                false, true, ConsumerConfig.DEFAULT_FETCH_MAX_BYTES);
    }

    /** @param credentials the token proved to exporters that check Kafka ACLs; null to prove none */
    RdmaFetcher(RdmaTransport transport, ExporterLocator locator, DelegationTokenCredentials credentials, ExporterConnections.Timing timing,
                RdmaFetchMetrics metrics, boolean readCommitted, boolean decodeAhead, long maxBytesAhead) {
        this.maxBytesAhead = maxBytesAhead;
        this.metrics = metrics;
        this.readCommitted = readCommitted;
        this.transport = transport;
        this.locator = locator;
        this.connections = new ExporterConnections(transport, timing, credentials, metrics::exporterReconnected);
        this.pool = transport.createBufferPool(PoolConfig.defaults());
        this.decoder = decodeAhead
                ? Executors.newSingleThreadExecutor(Thread.ofPlatform().daemon().name("rdma4j-kafka-decoder").factory()) : null;
    }

    /** Bytes held read ahead or left over, across partitions. */
    long bytesAhead() {
        long held = 0;
        for (PartitionState st : states.values()) {
            if (st.ahead != null) {
                held += st.ahead.bytes().byteSize();
            }
        }
        return held;
    }

    /** Forgets the partitions not in {@code assigned} (revoked, unassigned), giving back what was read ahead for them. */
    void retainPartitions(java.util.Set<TopicPartition> assigned) {
        for (TopicPartition tp : List.copyOf(states.keySet())) {
            if (!assigned.contains(tp)) {
                drop(tp);
            }
        }
        locator.retain(assigned);
    }

    /** The exporter {@code tp} was last read from, or null. */
    InetSocketAddress exporterOf(TopicPartition tp) {
        PartitionState st = states.get(tp);
        return st == null ? null : st.exporter;
    }

    private void drop(TopicPartition tp) {
        PartitionState st = states.remove(tp);
        if (st != null) {
            st.releaseAhead();
        }
    }

    /** Fetches up to {@code maxRecords} records of {@code tp} from {@code position}, reading at most about {@code maxBytes}. */
    <K, V> Result fetch(TopicPartition tp, long position, int maxRecords, int maxBytes,
                        Deserializer<K> keys, Deserializer<V> values) {
        Result r = fetchWithRetry(tp, position, maxRecords, maxBytes, keys, values);
        switch (r) {
            case Records<?, ?> records -> {
                metrics.records(tp, records.records().size());
                metrics.lag(tp, Math.max(0, records.highWatermark() - records.nextOffset()));
            }
            case Fallback f -> metrics.fallback(f.kind());
        }
        return r;
    }

    private <K, V> Result fetchWithRetry(TopicPartition tp, long position, int maxRecords, int maxBytes,
                                         Deserializer<K> keys, Deserializer<V> values) {
        // Two attempts: a replaced region (segment remapped, deleted, exporter restarted), a connection the
        // peer closed (a rejected READ closes it on every provider, as a queue pair enters the error state) or a
        // leader that moved is looked up again (on a fresh connection, at the new leader's exporter) at once,
        // rather than after a fallback period.
        for (int attempt = 0; ; attempt++) {
            ExporterLocator.Target target = locator.locate(tp);
            PartitionState held = states.get(tp);
            if (held != null && (target == null || !held.exporter.equals(target.address()))) {
                drop(tp); // Its descriptors name another exporter's regions.
            }
            RdmaConnection c = target == null ? null : connections.get(target.address());
            if (c == null) {
                return target == null ? giveUp(tp, FallbackReason.EXPORTER_UNREACHABLE, "no replica of " + tp + " is known")
                        : giveUp(tp, connections.whyNot(target.address()), "exporter " + target.address() + " not usable");
            }
            try {
                return fetchOnce(c, target, tp, position, maxRecords, maxBytes, keys, values);
            } catch (ExporterLocator.LeaderMoved e) {
                if (attempt > 0) {
                    return leaderMoving(tp, target, e.leaderId);
                }
                drop(tp);
                locator.leaderMoved(tp, e.leaderId);
                LOG.debug("leader of {} moved to node {}; reading from its exporter", tp, e.leaderId);
            } catch (TopicAuthorizationException e) {
                return giveUp(tp, FallbackReason.NOT_AUTHORIZED, e.getMessage());
            } catch (CorruptRecordException e) {
                metrics.crcFailure();
                drop(tp);
                LOG.warn("RDMA-read batch of {} failed its CRC check, fetching it through Kafka instead: {}", tp, e.getMessage());
                return new Fallback(FallbackReason.CORRUPT_BATCH, "corrupt batch: " + e.getMessage());
            } catch (RdmaException e) {
                drop(tp);
                if (!c.isOpen()) {
                    dropConnection(target.address());
                }
                boolean retriable = e instanceof ConnectionClosedException || (e instanceof RemoteAccessException rae
                        && rae.reason() != RemoteAccessException.Reason.ACCESS_DENIED);
                if (!retriable || attempt > 0) {
                    return giveUp(tp, FallbackReason.READ_FAILED, e.toString());
                }
                metrics.retry();
                LOG.debug("RDMA fetch of {} failed ({}); looking it up again{}", tp, e.toString(), c.isOpen() ? "" : " on a new connection");
            }
        }
    }

    private <K, V> Result fetchOnce(RdmaConnection c, ExporterLocator.Target target, TopicPartition tp, long position,
                                    int maxRecords, int maxBytes, Deserializer<K> keys, Deserializer<V> values) {
        PartitionState st = states.get(tp);
        if (st == null || st.cursorOffset != position) {
            st = directory(c, target, tp, position);
            if (st == null) {
                return notExported(tp, position);
            }
        }
        Watermark w = readWatermark(c, st);
        if (st.generation >= 0 && st.generation != w.generation()) {
            st = directory(c, target, tp, position);
            if (st == null) {
                return notExported(tp, position);
            }
            w = readWatermark(c, st);
        }
        if (target.outdatedBy(w.leaderId())) {
            if (locator.addressable(tp, w.leaderId())) {
                throw new ExporterLocator.LeaderMoved(w.leaderId());
            }
            return leaderMoving(tp, target, w.leaderId()); // Whichever is behind: Kafka's fetch refreshes the metadata meanwhile.
        }
        st.generation = w.generation();
        if (position < w.logStartOffset()) {
            return new Fallback(FallbackReason.BELOW_LOG_START, "offset " + position + " is below the log start " + w.logStartOffset());
        }
        // What may be returned ends at the high watermark, or for read_committed at the last stable offset (which
        // is also what Kafka measures that consumer's lag against).
        long end = readCommitted ? w.lastStableOffset() : w.highWatermark();
        if (position >= end) {
            return new Records<K, V>(List.of(), position, Optional.empty(), end);
        }
        for (int hops = 0; hops < 4; hops++) {
            SegmentDirectory.Segment seg = segment(st, st.cursorSegmentBase);
            if (seg == null || seg.baseOffset() > w.hwSegmentBase()
                    || (seg.baseOffset() < w.hwSegmentBase() && !seg.complete())
                    || (seg.baseOffset() == w.hwSegmentBase() && w.hwPosition() > seg.exportedLength())) {
                // Our directory is older than the watermark: the segment rolled, grew or was replaced.
                st = directory(c, target, tp, position);
                if (st == null) {
                    return notExported(tp, position);
                }
                seg = segment(st, st.cursorSegmentBase);
                if (seg == null || seg.baseOffset() > w.hwSegmentBase()) {
                    return new Fallback(FallbackReason.NOT_EXPORTED, "no exported segment holds offset " + position + " of " + tp);
                }
            }
            long validEnd = seg.baseOffset() == w.hwSegmentBase() ? Math.min(w.hwPosition(), seg.exportedLength()) : seg.exportedLength();
            if (st.cursorPosition >= validEnd) {
                if (seg.baseOffset() == w.hwSegmentBase()) {
                    return new Records<K, V>(List.of(), position, Optional.empty(), end);
                }
                SegmentDirectory.Segment next = nextSegment(st, seg.baseOffset());
                if (next == null) {
                    st.segments = List.of(); // Refresh on the next hop.
                    st.cursorSegmentBase = seg.baseOffset() + 1;
                    continue;
                }
                st.cursorSegmentBase = next.baseOffset();
                st.cursorPosition = 0;
                continue;
            }
            return readBatches(c, tp, st, seg, validEnd, end, position, maxRecords, maxBytes, keys, values);
        }
        return new Fallback(FallbackReason.DIRECTORY_CHANGING, "segment directory of " + tp + " keeps changing");
    }

    /** @param end the offset nothing at or above is returned: the high watermark, or the last stable offset */
    private <K, V> Result readBatches(RdmaConnection c, TopicPartition tp, PartitionState st, SegmentDirectory.Segment seg,
                                      long validEnd, long end, long position, int maxRecords, int maxBytes,
                                      Deserializer<K> keys, Deserializer<V> values) {
        long fetchBytes = Math.max(maxBytes, BatchHeaders.LOG_OVERHEAD);
        BatchRange range = st.ahead;
        st.ahead = null;
        if (range != null && !range.serves(seg.baseOffset(), st.cursorPosition, validEnd)) {
            range.release();
            range = null;
        }
        if (range == null) {
            range = BatchRange.read(seg.baseOffset(), st.cursorPosition,
                    read(c, seg, st.cursorPosition, Math.min(validEnd - st.cursorPosition, fetchBytes)));
        }
        int verifiedBatches = 0;
        long verifiedBytes = 0;
        try {
            DecodedBatches decoded = range.await();
            if (range.readNanos() > 0) {
                metrics.readNanos(range.readNanos());
            }
            long first = BatchHeaders.batchSize(range.bytes(), 0);
            if (first > range.bytes().byteSize()) {
                // One batch larger than the fetch size: read it whole, as Kafka returns at least one batch.
                if (first > MAX_BATCH_BYTES) {
                    throw new CorruptRecordException("batch at byte " + st.cursorPosition + " of segment " + seg.baseOffset()
                            + " claims " + first + " bytes, more than a record batch can have (" + MAX_BATCH_BYTES + ")");
                }
                if (st.cursorPosition + first > validEnd) {
                    throw new CorruptRecordException("batch at byte " + st.cursorPosition + " of segment " + seg.baseOffset()
                            + " claims " + first + " bytes, past the high watermark position " + validEnd);
                }
                range.release();
                range = null;
                range = BatchRange.read(seg.baseOffset(), st.cursorPosition, read(c, seg, st.cursorPosition, first));
                decoded = range.await();
            }
            List<ConsumerRecord<K, V>> out = new ArrayList<>();
            long next = position;
            long pos = st.cursorPosition;
            Optional<Integer> epoch = Optional.empty();
            // Zero-copy: uncompressed batches are parsed in place in the registered buffer.
            List<RecordBatchParser.Batch> read = decoded.batches();
            ReadCommittedFilter aborted = null;
            if (readCommitted) {
                StableRange stable = StableRange.lookUp(c, tp, read, position, end, abortedTransactionRequests);
                if (stable.fallback() != null) {
                    return stable.fallback();
                }
                read = read.subList(0, stable.batches());
                aborted = stable.filter();
            }
            batches:
            for (int i = 0; i < read.size(); i++) {
                RecordBatchParser.Batch batch = read.get(i);
                decoded.ensureValid(i); // CRC32C over the batch: a corrupt batch is never returned.
                verifiedBatches++;
                verifiedBytes += batch.sizeInBytes();
                if (batch.lastOffset() < position) {
                    pos += batch.sizeInBytes();
                    continue;
                }
                epoch = batch.partitionLeaderEpoch() < 0
                        ? Optional.empty() : Optional.of(batch.partitionLeaderEpoch());
                if (aborted != null && aborted.isAborted(batch)) {
                    next = Math.max(next, batch.nextOffset());
                    pos += batch.sizeInBytes();
                    continue;
                }
                if (!batch.isControlBatch()) {
                    for (RecordBatchParser.ParsedRecord r : decoded.records(i, decompressionBuffers)) {
                        if (r.offset() < next) {
                            continue;
                        }
                        if (out.size() == maxRecords) {
                            break batches; // The cursor stays on this batch; the rest is read next time.
                        }
                        ConsumerRecord<K, V> record;
                        try {
                            record = RecordConversion.toConsumerRecord(tp, batch, r, epoch, keys, values);
                        } catch (RecordDeserializationException e) {
                            if (out.isEmpty()) {
                                throw e;
                            }
                            // As KafkaConsumer: the records before it first; the next poll throws, at its offset.
                            break batches;
                        }
                        out.add(record);
                        next = r.offset() + 1;
                    }
                }
                next = Math.max(next, batch.nextOffset());
                pos += batch.sizeInBytes();
            }
            st.cursorOffset = next;
            st.cursorPosition = pos;
            // Stopped at max.poll.records: the next poll starts from the bytes and records already here. As
            // fetch.max.bytes bounds a KafkaConsumer's fetch, it bounds what this consumer holds across partitions.
            BatchRange rest = pos < range.end() ? range.rest(pos, decoded) : null;
            if (rest != null && bytesAhead() + rest.bytes().byteSize() <= maxBytesAhead) {
                st.ahead = rest;
                range = null;
            } else if (rest == null && pos < validEnd && bytesAhead() + Math.min(validEnd - pos, fetchBytes) <= maxBytesAhead) {
                st.ahead = BatchRange.readAhead(c, seg, pos, Math.min(validEnd - pos, fetchBytes), pool, decoder,
                        decoder == null ? null : bytes -> DecodedBatches.decode(bytes, decoderBuffers));
            }
            return new Records<>(out, next, epoch, end);
        } finally {
            if (range != null) {
                range.release();
            }
            // Once per fetch, not per batch: a Kafka sensor records under a lock and with a clock read.
            if (verifiedBatches > 0) {
                metrics.batches(verifiedBatches, verifiedBytes);
            }
        }
    }

    private PooledBuffer read(RdmaConnection c, SegmentDirectory.Segment seg, long offset, long length) {
        PooledBuffer buffer = pool.acquire(length);
        try {
            timedRead(c, seg.region(), offset, buffer.segment());
            return buffer;
        } catch (RuntimeException e) {
            buffer.close();
            throw e;
        }
    }

    private void timedRead(RdmaConnection c, io.rdma4j.core.RegionDescriptor region, long offset, MemorySegment into) {
        long start = System.nanoTime();
        c.readAndWait(region, offset, into);
        metrics.readNanos(System.nanoTime() - start);
    }

    private Watermark readWatermark(RdmaConnection c, PartitionState st) {
        try (PooledBuffer buffer = pool.acquire(Watermark.SIZE)) {
            for (int attempt = 0; attempt < 100; attempt++) {
                timedRead(c, st.watermark, 0, buffer.segment());
                Watermark w = Watermark.readFrom(buffer.segment());
                if (w != null) {
                    return w;
                }
                Thread.onSpinWait(); // Caught mid-update: read again.
            }
        }
        throw new RdmaException("the watermark record never read consistently (100 attempts)");
    }

    /** RDMA cannot serve {@code tp} now: its state and exporter are chosen afresh once the fallback period is over. */
    private Fallback giveUp(TopicPartition tp, FallbackReason reason, String why) {
        drop(tp);
        locator.forget(tp);
        return new Fallback(reason, why);
    }

    /** Exporters keep naming another leader: Kafka's fetch serves (and refreshes the metadata) meanwhile. */
    private Fallback leaderMoving(TopicPartition tp, ExporterLocator.Target target, int leaderId) {
        return giveUp(tp, FallbackReason.LEADER_MOVING, target.address() + " names node " + leaderId + " the leader of " + tp);
    }

    private Fallback notExported(TopicPartition tp, long position) {
        return giveUp(tp, FallbackReason.NOT_EXPORTED, "offset " + position + " of " + tp + " is not exported");
    }

    private PartitionState directory(RdmaConnection c, ExporterLocator.Target target, TopicPartition tp, long fromOffset) {
        directoryRequests.increment();
        SegmentDirectory.Response r = SegmentDirectory.Response.fromBytes(c.requestAndWait(RequestTypes.KAFKA_DIRECTORY,
                ByteBuffer.wrap(new SegmentDirectory.Request(tp.topic(), tp.partition(), fromOffset).toBytes())));
        if (r.status() == SegmentDirectory.Status.NOT_AUTHORIZED) {
            throw new TopicAuthorizationException(target.address() + " serves " + tp.topic() + " only to consumers that may READ it");
        }
        if (r.status() != SegmentDirectory.Status.OK || r.segments().isEmpty()) {
            drop(tp);
            return null;
        }
        PartitionState st = new PartitionState();
        st.exporter = target.address();
        st.watermark = r.watermarkRegion();
        st.segments = r.segments();
        st.cursorOffset = fromOffset;
        st.cursorSegmentBase = r.segments().getFirst().baseOffset();
        st.cursorPosition = r.startPosition();
        PartitionState replaced = states.put(tp, st);
        if (replaced != null) {
            replaced.releaseAhead();
        }
        return st;
    }

    private static SegmentDirectory.Segment segment(PartitionState st, long base) {
        for (SegmentDirectory.Segment s : st.segments) {
            if (s.baseOffset() == base) {
                return s;
            }
        }
        return null;
    }

    private static SegmentDirectory.Segment nextSegment(PartitionState st, long base) {
        for (SegmentDirectory.Segment s : st.segments) {
            if (s.baseOffset() > base) {
                return s;
            }
        }
        return null;
    }

    /** Closes the connection to {@code exporter} and forgets what was looked up through it. */
    private void dropConnection(InetSocketAddress exporter) {
        connections.drop(exporter); // Fails what is still in flight, so read-ahead buffers go back.
        for (TopicPartition tp : List.copyOf(states.keySet())) {
            if (states.get(tp).exporter.equals(exporter)) {
                drop(tp); // Descriptors may belong to an exporter that is gone.
            }
        }
    }

    @Override
    public void close() {
        List<BatchRange> inFlight = states.values().stream().map(st -> st.ahead).filter(java.util.Objects::nonNull).toList();
        connections.close(); // Fails what is still in flight, so read-ahead buffers go back.
        states.values().forEach(PartitionState::releaseAhead);
        states.clear();
        // Nothing may still be written into the pool's memory when it is freed.
        inFlight.forEach(r -> r.awaitFinished(transport.config().operationTimeout()));
        if (decoder != null) {
            decoder.close(); // Waits for decoding under way (of ranges released earlier too): it reads pool memory.
        }
        pool.close();
        decoderBuffers.close();
        decompressionBuffers.close();
    }
}
