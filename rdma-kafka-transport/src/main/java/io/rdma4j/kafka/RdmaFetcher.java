package io.rdma4j.kafka;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.kafka.protocol.BatchHeaders;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.LongAdder;

/**
 * Fetches partitions from brokers' log exporters by one-sided RDMA READ, and decides what happens when that fails:
 * looked up again at once (a replaced region, a closed connection, a leader that moved), or handed back to Kafka's
 * fetch for a while ({@link FetchResult.Fallback}). One fetch asks {@link ExporterLocator} which exporter,
 * {@link SegmentLocator} where in its memory, {@link ExporterReads} for the bytes and {@link RecordCollector} for
 * the records.
 */
final class RdmaFetcher implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaFetcher.class);

    private final ExporterLocator locator;
    private final ExporterConnections connections;
    private final SegmentLocator segments;
    private final ExporterReads reads;
    private final RecordCollector collector;
    /** Never null: a fetcher whose counts nobody reads gets {@link RdmaFetchMetrics#detached()}. */
    private final RdmaFetchMetrics metrics;
    /**
     * {@code isolation.level=read_committed}: nothing at or above the last stable offset is returned, and aborted
     * transactions, learnt from the exporter for the range read, are dropped.
     */
    private final boolean readCommitted;
    private final DirectoryLookups directories;
    /** Not connected to yet: see {@link #connectEarly}. */
    private List<InetSocketAddress> likelyExporters = List.of();
    final LongAdder abortedTransactionRequests = new LongAdder();

    RdmaFetcher(RdmaTransport transport, InetSocketAddress exporter, Duration reconnectBackoff) {
        this(transport, ExporterLocator.fixed(exporter), null, ExporterConnections.Timing.of(reconnectBackoff), RdmaFetchMetrics.detached(),
                false, true, ConsumerConfig.DEFAULT_FETCH_MAX_BYTES);
    }

    /** @param credentials the token proved to exporters that check Kafka ACLs; null to prove none */
    RdmaFetcher(RdmaTransport transport, ExporterLocator locator, DelegationTokenCredentials credentials, ExporterConnections.Timing timing,
                RdmaFetchMetrics metrics, boolean readCommitted, boolean decodeAhead, long maxBytesAhead) {
        this.metrics = metrics;
        this.readCommitted = readCommitted;
        this.locator = locator;
        this.connections = new ExporterConnections(transport, timing, credentials, metrics::exporterReconnected);
        this.reads = new ExporterReads(transport, metrics, decodeAhead, maxBytesAhead);
        this.directories = new DirectoryLookups(reads::watermarkAhead, System::nanoTime);
        this.segments = new SegmentLocator(readCommitted, reads::release);
        this.collector = new RecordCollector(metrics);
    }

    /** The registered buffers RDMA reads land in. */
    RegisteredBufferPool pool() {
        return reads.pool();
    }

    /** Whether a connection to an exporter (a connect, a proof) is being set up now. */
    boolean settingUp() {
        return connections.settingUp();
    }

    /** Bytes held read ahead or left over, across partitions. */
    long bytesAhead() {
        return reads.bytesAhead();
    }

    /** Forgets the partitions not in {@code assigned} (revoked, unassigned), giving back what was read ahead for them. */
    void retainPartitions(Set<TopicPartition> assigned) {
        segments.retain(assigned);
        directories.retain(assigned);
        locator.retain(assigned);
    }

    /** The exporter {@code tp} was last read from, or null. */
    InetSocketAddress exporterOf(TopicPartition tp) {
        return segments.exporterOf(tp);
    }

    /**
     * Starts setting up the connections to the exporters of {@code partitions} that are not ready, without waiting,
     * and takes over those set up since: asked at each poll before its fetches, so that all of a new consumer's
     * exporters are connected to at once. Returns whether every one is ready to read.
     */
    boolean connectAhead(Collection<TopicPartition> partitions) {
        Map<InetSocketAddress, List<TopicPartition>> byExporter = new HashMap<>();
        boolean ready = true;
        for (TopicPartition tp : partitions) {
            ExporterLocator.Target target = locator.locate(tp);
            if (target == null) {
                ready = false;
            } else {
                byExporter.computeIfAbsent(target.address(), a -> new ArrayList<>()).add(tp);
            }
        }
        for (var e : byExporter.entrySet()) {
            ready &= connections.get(e.getKey(), e.getValue()) != null;
        }
        return ready;
    }

    /**
     * The exporters partitions are likely to be read from ({@link ExporterLocator#likelyExporters} of
     * {@code bootstrapServers}), for {@link #connectEarly}; resolved as the consumer is built, as Kafka resolves them.
     */
    void expectExporters(Object bootstrapServers) {
        likelyExporters = locator.likelyExporters(bootstrapServers);
    }

    /**
     * Starts connecting to the likely exporters, once, before any partition is located: at a new consumer's first poll,
     * so that its connections are set up while its KafkaConsumer fetches metadata and offsets. Each proof names
     * {@code topics} (those subscribed or assigned), on which an exporter that checks ACLs decides before it answers.
     */
    void connectEarly(Collection<String> topics) {
        if (likelyExporters.isEmpty() || topics.isEmpty()) {
            return; // Not subscribed yet: the first poll that is connects.
        }
        List<InetSocketAddress> exporters = likelyExporters;
        likelyExporters = List.of();
        connections.connectEarly(exporters, topics);
    }

    /**
     * Closes the connections made early to exporters no assigned partition is read from, once each has its
     * exporter located (by the fetches: this asks for no metadata); until then, and with nothing assigned, once they
     * went unused for {@code connections.max.idle.ms}. Asked after each poll's fetches, while such connections are open.
     */
    void settleEarly(java.util.function.Supplier<Set<TopicPartition>> assignment) {
        if (!connections.connectedEarly()) {
            return;
        }
        Set<TopicPartition> assigned = assignment.get();
        Set<InetSocketAddress> readFrom = new java.util.HashSet<>();
        boolean located = !assigned.isEmpty();
        for (TopicPartition tp : assigned) {
            ExporterLocator.Target target = locator.located(tp);
            if (target == null) {
                located = false;
            } else {
                readFrom.add(target.address());
            }
        }
        connections.closeUnlocated(readFrom, located);
    }

    /** Whether the first poll's early connections are still to be made ({@link #connectEarly}). */
    boolean connectsEarly() {
        return !likelyExporters.isEmpty();
    }

    /**
     * Sends, without waiting, the directory lookup of each of {@code partitions} whose connection is ready and where
     * nothing is located yet ({@link DirectoryLookups}): a new consumer's lookups then overlap instead of coming one
     * after another, each after the fetch before it. A partition whose position is still being reset is looked up
     * from where the reset is expected to go ({@link ReadPositions#resetGuess}), if that can be told. Returns whether
     * the position of any partition with a ready connection was still being reset.
     */
    boolean lookUpAhead(Collection<TopicPartition> partitions, ReadPositions positions) {
        boolean resetting = false;
        for (TopicPartition tp : partitions) {
            ExporterLocator.Target target = locator.locate(tp);
            RdmaConnection c = target == null ? null : connections.get(target.address(), List.of(tp));
            if (c == null) {
                continue;
            }
            long from;
            try {
                from = positions.position(tp, Duration.ZERO);
            } catch (org.apache.kafka.common.errors.TimeoutException notYet) {
                resetting = true;
                OptionalLong guess = positions.resetGuess(tp);
                if (guess.isEmpty()) {
                    continue; // the fetch waits for the position, then looks it up
                }
                from = guess.getAsLong();
            }
            if (!segments.locatedAt(tp, from, target.address())) {
                directories.sendAhead(c, tp, from);
            }
        }
        return resetting;
    }

    /** Directory lookups sent to exporters, ahead or not. */
    long directoryRequests() {
        return directories.sent.sum();
    }

    /**
     * Why RDMA cannot serve {@code tp} now, known without its position (no replica known, or its exporter's connection
     * not ready: being set up, unreachable, unauthorized), counted; null when it may be fetched.
     */
    FetchResult.Fallback notReady(TopicPartition tp) {
        ExporterLocator.Target target = locator.locate(tp);
        FetchResult.Fallback f = target == null ? giveUp(tp, FallbackReason.EXPORTER_UNREACHABLE, "no replica of " + tp + " is known")
                : connections.get(target.address(), List.of(tp)) == null ? unusable(tp, target) : null;
        if (f != null) {
            metrics.fallback(f.kind());
        }
        return f;
    }

    /** Fetches up to {@code maxRecords} records of {@code tp} from {@code position}, reading at most about {@code maxBytes}. */
    <K, V> FetchResult fetch(TopicPartition tp, long position, int maxRecords, int maxBytes,
                             Deserializer<K> keys, Deserializer<V> values) {
        FetchResult r = fetchWithRetry(tp, position, maxRecords, maxBytes, keys, values);
        switch (r) {
            case FetchResult.Records<?, ?> records -> {
                metrics.records(tp, records.records().size());
                metrics.lag(tp, Math.max(0, records.highWatermark() - records.nextOffset()));
            }
            case FetchResult.Fallback f -> metrics.fallback(f.kind());
        }
        return r;
    }

    private <K, V> FetchResult fetchWithRetry(TopicPartition tp, long position, int maxRecords, int maxBytes,
                                              Deserializer<K> keys, Deserializer<V> values) {
        // Two attempts: a replaced region (segment remapped, deleted, exporter restarted), a connection the
        // peer closed (a rejected READ closes it on every provider, as a queue pair enters the error state) or a
        // leader that moved is looked up again (on a fresh connection, at the new leader's exporter) at once,
        // rather than after a fallback period.
        for (int attempt = 0; ; attempt++) {
            ExporterLocator.Target target = locator.locate(tp);
            InetSocketAddress held = segments.exporterOf(tp);
            if (held != null && (target == null || !held.equals(target.address()))) {
                segments.forget(tp); // Its descriptors name another exporter's regions.
            }
            RdmaConnection c = target == null ? null : connections.get(target.address(), List.of(tp));
            if (c == null) {
                return target == null ? giveUp(tp, FallbackReason.EXPORTER_UNREACHABLE, "no replica of " + tp + " is known")
                        : unusable(tp, target);
            }
            try {
                return fetchOnce(c, target, tp, position, maxRecords, maxBytes, keys, values);
            } catch (ExporterLocator.LeaderMoved e) {
                if (attempt > 0) {
                    return leaderMoving(tp, target, e.leaderId);
                }
                segments.forget(tp);
                locator.leaderMoved(tp, e.leaderId);
                LOG.debug("leader of {} moved to node {}; reading from its exporter", tp, e.leaderId);
            } catch (TopicAuthorizationException e) {
                return giveUp(tp, FallbackReason.NOT_AUTHORIZED, e.getMessage());
            } catch (CorruptRecordException e) {
                metrics.crcFailure();
                segments.forget(tp);
                LOG.warn("RDMA-read batch of {} failed its CRC check, fetching it through Kafka instead: {}", tp, e.getMessage());
                return new FetchResult.Fallback(FallbackReason.CORRUPT_BATCH, "corrupt batch: " + e.getMessage());
            } catch (RdmaException e) {
                segments.forget(tp);
                if (!c.isOpen()) {
                    connections.drop(target.address()); // Fails what is still in flight, so read-ahead buffers go back.
                    segments.forgetAt(target.address());
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

    private <K, V> FetchResult fetchOnce(RdmaConnection c, ExporterLocator.Target target, TopicPartition tp, long position,
                                         int maxRecords, int maxBytes, Deserializer<K> keys, Deserializer<V> values) {
        return switch (segments.where(tp, target, position, exporter(c, tp))) {
            case SegmentLocator.Bytes at -> readBatches(c, tp, at, position, maxRecords, maxBytes, keys, values);
            case SegmentLocator.NothingNew n -> new FetchResult.Records<K, V>(List.of(), position, Optional.empty(), n.end());
            case SegmentLocator.Unreadable u -> u.fallback();
            case SegmentLocator.NotExported n -> giveUp(tp, FallbackReason.NOT_EXPORTED, "offset " + position + " of " + tp + " is not exported");
            case SegmentLocator.LeaderElsewhere l -> {
                if (locator.addressable(tp, l.leaderId())) {
                    throw new ExporterLocator.LeaderMoved(l.leaderId());
                }
                yield leaderMoving(tp, target, l.leaderId()); // Whichever is behind: Kafka's fetch refreshes the metadata meanwhile.
            }
        };
    }

    private <K, V> FetchResult readBatches(RdmaConnection c, TopicPartition tp, SegmentLocator.Bytes at, long position,
                                           int maxRecords, int maxBytes, Deserializer<K> keys, Deserializer<V> values) {
        long fetchBytes = Math.max(maxBytes, BatchHeaders.LOG_OVERHEAD);
        BatchRange range = reads.load(tp, c, at.segment(), at.position(), at.validEnd(), fetchBytes);
        try {
            DecodedBatches decoded = range.await();
            int usable = decoded.batches().size();
            ReadCommittedFilter aborted = null;
            if (readCommitted) {
                StableRange stable = StableRange.lookUp(c, tp, decoded.batches(), position, at.end(), abortedTransactionRequests);
                if (stable.fallback() != null) {
                    return stable.fallback();
                }
                usable = stable.batches();
                aborted = stable.filter();
            }
            RecordCollector.Collected<K, V> got = collector.collect(tp, decoded, usable, aborted, position, at.position(),
                    maxRecords, keys, values);
            segments.advance(tp, got.nextOffset(), got.nextPosition());
            // Stopped at max.poll.records: the next poll starts from the bytes and records already here. As
            // fetch.max.bytes bounds a KafkaConsumer's fetch, it bounds what this consumer holds across partitions.
            if (reads.keepAhead(tp, c, at.segment(), range, got.nextPosition(), at.validEnd(), fetchBytes)) {
                range = null;
            }
            return new FetchResult.Records<>(got.records(), got.nextOffset(), got.leaderEpoch(), at.end());
        } finally {
            if (range != null) {
                range.release();
            }
        }
    }

    /** The exporter at the other end of {@code c}, as {@link SegmentLocator} asks it for {@code tp}. */
    private SegmentLocator.Exporter exporter(RdmaConnection c, TopicPartition forPartition) {
        return new SegmentLocator.Exporter() {
            @Override
            public SegmentDirectory.Response directory(TopicPartition tp, long fromOffset) {
                return directories.lookUp(c, tp, fromOffset);
            }

            @Override
            public Watermark watermark(RegionDescriptor region) {
                Watermark ahead = directories.watermarkAhead(c, forPartition, region);
                return ahead != null ? ahead : reads.watermark(c, region);
            }
        };
    }

    /** RDMA cannot serve {@code tp} now: its state and exporter are chosen afresh once the fallback period is over. */
    private FetchResult.Fallback giveUp(TopicPartition tp, FallbackReason reason, String why) {
        return giveUp(tp, reason, why, null);
    }

    /** As {@link #giveUp(TopicPartition, FallbackReason, String)}, for no longer than until {@code settled} completes. */
    private FetchResult.Fallback giveUp(TopicPartition tp, FallbackReason reason, String why, CompletableFuture<?> settled) {
        segments.forget(tp);
        locator.forget(tp);
        return new FetchResult.Fallback(reason, why, settled);
    }

    /** {@code tp}'s exporter has no connection ready to read: until it is set up, or for the fallback period. */
    private FetchResult.Fallback unusable(TopicPartition tp, ExporterLocator.Target target) {
        FallbackReason why = connections.whyNot(target.address());
        return why == FallbackReason.EXPORTER_CONNECTING
                ? giveUp(tp, why, connections.settingUp(target.address()), connections.settling(target.address()))
                : giveUp(tp, why, "exporter " + target.address() + " not usable");
    }

    /** Exporters keep naming another leader: Kafka's fetch serves (and refreshes the metadata) meanwhile. */
    private FetchResult.Fallback leaderMoving(TopicPartition tp, ExporterLocator.Target target, int leaderId) {
        return giveUp(tp, FallbackReason.LEADER_MOVING, target.address() + " names node " + leaderId + " the leader of " + tp);
    }

    @Override
    public void close() {
        connections.close(); // Fails what is still in flight, so read-ahead buffers go back.
        reads.close();
        collector.close();
    }
}
