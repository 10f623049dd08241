package io.rdma4j.kafka;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.metrics.TransportMetrics;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.Deserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * A {@link Consumer} that fetches record batches by one-sided RDMA READ from the broker's log exporter
 * and does everything else (group membership, rebalances, commits, seeks, positions, pause/resume) through
 * an internal {@link KafkaConsumer}, so it behaves exactly as one.
 *
 * <p>How poll() divides the work: the partitions RDMA serves are paused in the internal consumer
 * ({@link ServedPartitions}), so it never fetches them; {@link PollMerge} fetches them by RDMA and merges their records
 * with the internal consumer's. Their positions after RDMA reads are kept in {@link ReadPositions} rather than moved with
 * {@code seek}, which {@code KafkaConsumer} logs at INFO each time; position(), commits without offsets and
 * auto-commit ({@link AutoCommit}, taken over from the internal consumer) use them. A partition RDMA cannot serve
 * (exporter unreachable, offset not exported or below the log start, corrupt batch) is handed back to the normal
 * fetch path, with one seek, for {@code rdma.fetch.fallback.backoff.ms}.
 *
 * <p>poll() never waits for RDMA to be set up ({@link ExporterSetup}): until an exporter's connection is ready (with
 * delegation tokens, the token created and proven) its partitions are fetched through Kafka, so a new consumer's first
 * records come as soon as a KafkaConsumer's would; then RDMA takes each over where Kafka's fetch left it.
 *
 * <p>{@code isolation.level=read_committed} is served by RDMA too: records stop at the last stable offset the
 * exporter publishes, and the aborted transactions of each range read are asked of the exporter (which reads the
 * segments' transaction indexes), so aborted and control batches are skipped exactly as {@code KafkaConsumer} skips them.
 */
public final class RdmaKafkaConsumer<K, V> implements Consumer<K, V> {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaKafkaConsumer.class);

    /** The longest poll() waits for a topic's metadata to choose its exporter; normally it is known already. */
    private static final Duration METADATA_WAIT = Duration.ofMillis(500);

    private final KafkaConsumer<K, V> delegate;
    private final List<ConsumerInterceptor<K, V>> interceptors;
    private final RdmaConsumerConfig rdmaConfig;
    private final RdmaTransport transport;
    private final RdmaFetcher fetcher;
    private final ServedPartitions served;
    /** Null when RDMA is off. */
    private final PollMerge<K, V> merge;
    private final RdmaFetchMetrics rdmaMetrics;
    private final ReadPositions positions;
    /** Null unless the application asked for auto-commit (then the internal consumer's is off). */
    private final AutoCommit autoCommit;
    private final RdmaReadLog readLog;
    /** Set once close() has committed: the revocations that closing brings commit nothing more. */
    private boolean closing;

    public RdmaKafkaConsumer(Map<String, Object> configs, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
        this.rdmaConfig = RdmaConsumerConfig.from(configs);
        Map<String, Object> kafka = RdmaConsumerConfig.kafkaConfigs(configs);
        Deserializer<K> keys = keyDeserializer != null ? keyDeserializer : ConsumerPlugins.newDeserializer(kafka, ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, true);
        Deserializer<V> values = valueDeserializer != null ? valueDeserializer : ConsumerPlugins.newDeserializer(kafka, ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, false);
        this.interceptors = ConsumerPlugins.newInterceptors(kafka);
        if (!interceptors.isEmpty()) {
            kafka.put(ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG, InterceptorBridge.class.getName());
            kafka.put(InterceptorBridge.TARGETS, interceptors);
        }
        boolean readCommitted = "read_committed".equals(String.valueOf(kafka.getOrDefault(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "")).trim().toLowerCase(Locale.ROOT));
        boolean ownAutoCommit = rdmaConfig.enabled() && AutoCommit.takeOver(kafka);
        this.delegate = new KafkaConsumer<>(kafka, keys, values);
        this.positions = new ReadPositions(delegate, String.valueOf(kafka.getOrDefault(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest")),
                RdmaConsumerConfig.inGroup(kafka), readCommitted);
        this.autoCommit = ownAutoCommit ? AutoCommit.of(delegate, positions::consumed, kafka) : null;
        this.rdmaMetrics = new RdmaFetchMetrics(RdmaFetchMetrics.clientIdOf(delegate));
        RdmaTransport t = null;
        RdmaFetcher f = null;
        if (rdmaConfig.enabled()) {
            DelegationTokenCredentials credentials = null;
            try {
                t = RdmaTransport.open(rdmaConfig.transport());
                rdmaMetrics.transport(t.metrics());
                ExporterLocator locator = rdmaConfig.exporterAddress() != null ? ExporterLocator.fixed(rdmaConfig.exporterAddress())
                        : ExporterLocator.perBroker(rdmaConfig::exporterPortFor, java.util.Objects.toString(kafka.get(ConsumerConfig.CLIENT_RACK_CONFIG), null),
                        topic -> delegate.partitionsFor(topic, METADATA_WAIT), delegate::wakeup);
                credentials = rdmaConfig.delegationToken() ? new DelegationTokenCredentials(kafka, rdmaConfig.tokenLifetime(),
                        rdmaConfig.fallbackBackoff(), rdmaConfig.tokenLinger()) : null;
                f = new RdmaFetcher(t, locator, credentials, new ExporterConnections.Timing(rdmaConfig.fallbackBackoff(),
                        rdmaConfig.keepAlive(), rdmaConfig.connectionsMaxIdle()), rdmaMetrics, readCommitted,
                        rdmaConfig.decodeAhead(), RdmaConsumerConfig.intValue(kafka, ConsumerConfig.FETCH_MAX_BYTES_CONFIG, ConsumerConfig.DEFAULT_FETCH_MAX_BYTES));
                if (rdmaConfig.connectEarly()) {
                    f.expectExporters(kafka.get(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG));
                }
            } catch (RuntimeException e) {
                if (f != null) {
                    try {
                        f.close(); // Lets go of the credentials too.
                    } catch (RuntimeException closing) {
                        e.addSuppressed(closing);
                    }
                    f = null;
                    credentials = null;
                }
                if (credentials != null) {
                    credentials.close(); // Its share of the token; nothing was proven with it.
                }
                if (t != null) {
                    t.close();
                    t = null;
                }
                LOG.warn("RDMA fetching is off for this consumer, every partition uses the normal fetch path: {}", e.getMessage());
            }
        }
        this.transport = t;
        this.fetcher = f;
        this.readLog = new RdmaReadLog(t == null ? "" : t.selection().provider());
        this.served = new ServedPartitions(delegate, f, positions, readLog, rdmaMetrics);
        this.merge = f == null ? null : new PollMerge<>(f, served, positions, readLog, keys, values,
                RdmaConsumerConfig.intValue(kafka, ConsumerConfig.MAX_POLL_RECORDS_CONFIG, ConsumerConfig.DEFAULT_MAX_POLL_RECORDS),
                RdmaConsumerConfig.intValue(kafka, ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, ConsumerConfig.DEFAULT_MAX_PARTITION_FETCH_BYTES),
                rdmaConfig.fallbackBackoff(), rdmaConfig.setupWait());
    }

    /** The transport's counters (READ ops and bytes prove RDMA reads happened); null when RDMA is off. */
    public TransportMetrics transportMetrics() {
        return transport == null ? null : transport.metrics();
    }

    /** The provider the RDMA transport runs on and why it was chosen; null when RDMA is off. */
    public io.rdma4j.core.ProviderSelection providerSelection() {
        return transport == null ? null : transport.selection();
    }

    /** The log exporter {@code tp} was last read from by RDMA, or null (not read by RDMA, or RDMA is off). */
    public InetSocketAddress rdmaExporterOf(TopicPartition tp) {
        return fetcher == null ? null : fetcher.exporterOf(tp);
    }

    /** @deprecated {@link #metrics()} has it: {@code records-rdma-total} of group {@code consumer-rdma-fetch-metrics} */
    @Deprecated(since = "0.1.0")
    public long rdmaRecords() {
        return rdmaMetrics.total("records-rdma-total");
    }

    /** @deprecated {@link #metrics()} has it: {@code retries-total} of group {@code consumer-rdma-fetch-metrics} */
    @Deprecated(since = "0.1.0")
    public long rdmaRetries() {
        return rdmaMetrics.total("retries-total");
    }

    /** @deprecated {@link #metrics()} has it: {@code crc-failures-total} of group {@code consumer-rdma-fetch-metrics} */
    @Deprecated(since = "0.1.0")
    public long crcFailures() {
        return rdmaMetrics.total("crc-failures-total");
    }

    /** Whether a connection to an exporter (a connect, a proof) is being set up now; for the polling thread. */
    boolean settingUpExporters() {
        return fetcher != null && fetcher.settingUp();
    }

    /** Bytes the RDMA fetcher holds read ahead or left over now, across partitions: at most {@code fetch.max.bytes}. */
    long fetchBytesAhead() {
        return fetcher == null ? 0 : fetcher.bytesAhead();
    }

    /** Registered buffers the RDMA fetcher holds now: at most one range read ahead or left over per partition. */
    long fetchBuffersHeld() {
        return fetcher == null ? 0 : fetcher.pool().outstandingBuffers();
    }

    /** Whether this consumer fetches by RDMA at all (false when the transport failed to open). */
    public boolean rdmaActive() {
        return fetcher != null;
    }

    @Override
    public ConsumerRecords<K, V> poll(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        boolean first = true;
        while (true) {
            served.sync();
            if (autoCommit != null) {
                autoCommit.beforePoll();
            }
            if (first && fetcher != null && fetcher.connectsEarly()) {
                fetcher.connectEarly(topicsRead());
            }
            Duration wait = first ? Duration.ZERO : Duration.ofNanos(Math.max(0, Math.min(rdmaConfig.pollInterval().toNanos(), deadline - System.nanoTime())));
            if (fetcher == null) {
                wait = timeout; // No RDMA: exactly a KafkaConsumer.
            }
            ConsumerRecords<K, V> fromKafka = delegate.poll(wait);
            first = false;
            if (fetcher == null) {
                return onConsume(fromKafka);
            }
            ConsumerRecords<K, V> merged = merge.merge(fromKafka);
            fetcher.settleEarly(delegate::assignment);
            if (merged != null) {
                return onConsume(merged);
            }
            if (System.nanoTime() - deadline >= 0) {
                return ConsumerRecords.empty();
            }
        }
    }

    /** The topics subscribed to or assigned: what the first poll's early connections name in their proofs. */
    private Set<String> topicsRead() {
        Set<String> topics = new java.util.TreeSet<>(delegate.subscription());
        delegate.assignment().forEach(tp -> topics.add(tp.topic()));
        return topics;
    }

    private ConsumerRecords<K, V> onConsume(ConsumerRecords<K, V> records) {
        ConsumerRecords<K, V> out = records;
        for (ConsumerInterceptor<K, V> i : interceptors) {
            try {
                out = i.onConsume(out);
            } catch (Exception e) {
                // As KafkaConsumer does: logged, and the records pass on unchanged.
                LOG.warn("Error executing interceptor onConsume callback", e);
            }
        }
        return out;
    }

    // ---- everything else is the internal KafkaConsumer's ----

    @Override public Set<TopicPartition> assignment() { return delegate.assignment(); }
    @Override public Set<String> subscription() { return delegate.subscription(); }
    @Override public void subscribe(Collection<String> topics) { subscribe(topics, NO_LISTENER); }
    @Override public void subscribe(Collection<String> topics, ConsumerRebalanceListener listener) { delegate.subscribe(topics, handingOver(listener)); }
    @Override
    public void assign(Collection<TopicPartition> partitions) {
        if (autoCommit != null) {
            autoCommit.beforePoll(); // as KafkaConsumer commits before an assignment changes
        }
        delegate.assign(partitions);
        served.assignedManually();
        positions.retain(delegate.assignment());
    }

    @Override public void subscribe(Pattern pattern, ConsumerRebalanceListener listener) { delegate.subscribe(pattern, handingOver(listener)); }
    @Override public void subscribe(Pattern pattern) { subscribe(pattern, NO_LISTENER); }
    @Override public void subscribe(SubscriptionPattern pattern, ConsumerRebalanceListener listener) { delegate.subscribe(pattern, handingOver(listener)); }
    @Override public void subscribe(SubscriptionPattern pattern) { subscribe(pattern, NO_LISTENER); }

    private static final ConsumerRebalanceListener NO_LISTENER = new ConsumerRebalanceListener() {
        @Override public void onPartitionsRevoked(Collection<TopicPartition> partitions) { }
        @Override public void onPartitionsAssigned(Collection<TopicPartition> partitions) { }
    };

    /**
     * The listener a subscription runs under: it pauses newly assigned partitions in the internal consumer as soon as
     * a rebalance hands them over, before it fetches in the same poll (otherwise their first records would come by
     * the normal path), and RDMA serves a partition only from then until its revocation. The group assigns this
     * consumer's partitions from now on.
     */
    private ConsumerRebalanceListener handingOver(ConsumerRebalanceListener user) {
        served.subscribed();
        return new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                served.revoked(partitions); // RDMA stops here, as Kafka's fetch stops at a revocation
                // KafkaConsumer auto-commits before the application's listener runs.
                if (autoCommit != null && !closing && !partitions.isEmpty()) {
                    autoCommit.now("before partitions are revoked");
                }
                try {
                    user.onPartitionsRevoked(partitions);
                } finally {
                    readLog.stopped(partitions, "the partition was revoked");
                    positions.revoke(partitions);
                }
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                served.revoked(partitions);
                try {
                    user.onPartitionsLost(partitions);
                } finally {
                    readLog.stopped(partitions, "the partition was lost (the group moved on without this consumer)");
                    positions.forget(partitions);
                }
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                positions.forget(partitions); // positioned afresh by Kafka
                served.handedOver(partitions);
                served.sync();
                user.onPartitionsAssigned(partitions);
            }
        };
    }
    @Override
    public void unsubscribe() {
        delegate.unsubscribe();
        served.assignedManually(); // nothing assigned
        positions.forgetAll();
    }

    // Commits without offsets commit the positions as this consumer knows them: the internal consumer's lag behind RDMA's.
    @Override public void commitSync() { delegate.commitSync(positions.consumed()); }
    @Override public void commitSync(Duration timeout) { delegate.commitSync(positions.consumed(), timeout); }
    @Override public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) { delegate.commitSync(offsets); }
    @Override public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets, Duration timeout) { delegate.commitSync(offsets, timeout); }
    @Override public void commitAsync() { delegate.commitAsync(positions.consumed(), null); }
    @Override public void commitAsync(OffsetCommitCallback callback) { delegate.commitAsync(positions.consumed(), callback); }
    @Override public void commitAsync(Map<TopicPartition, OffsetAndMetadata> offsets, OffsetCommitCallback callback) { delegate.commitAsync(offsets, callback); }
    @Override public void registerMetricForSubscription(KafkaMetric metric) { delegate.registerMetricForSubscription(metric); }
    @Override public void unregisterMetricFromSubscription(KafkaMetric metric) { delegate.unregisterMetricFromSubscription(metric); }
    @Override
    public void seek(TopicPartition partition, long offset) {
        delegate.seek(partition, offset);
        positions.forget(List.of(partition));
    }

    @Override
    public void seek(TopicPartition partition, OffsetAndMetadata offsetAndMetadata) {
        delegate.seek(partition, offsetAndMetadata);
        positions.forget(List.of(partition));
    }

    @Override
    public void seekToBeginning(Collection<TopicPartition> partitions) {
        delegate.seekToBeginning(partitions);
        positions.resetting(partitions.isEmpty() ? delegate.assignment() : partitions, false); // none named: all, as in Kafka
    }

    @Override
    public void seekToEnd(Collection<TopicPartition> partitions) {
        delegate.seekToEnd(partitions);
        positions.resetting(partitions.isEmpty() ? delegate.assignment() : partitions, true);
    }

    @Override public long position(TopicPartition partition) { return positions.position(partition); }
    @Override public long position(TopicPartition partition, Duration timeout) { return positions.position(partition, timeout); }
    @Override public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions) { return delegate.committed(partitions); }
    @Override public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions, Duration timeout) { return delegate.committed(partitions, timeout); }
    @Override public Uuid clientInstanceId(Duration timeout) { return delegate.clientInstanceId(timeout); }
    /**
     * The internal consumer's metrics, with the client-level {@code records-consumed-*} and {@code bytes-consumed-*}
     * counting RDMA-read records too, and the {@value RdmaFetchMetrics#GROUP} group.
     */
    @Override public Map<MetricName, ? extends Metric> metrics() { return rdmaMetrics.merged(delegate.metrics()); }
    @Override public List<PartitionInfo> partitionsFor(String topic) { return delegate.partitionsFor(topic); }
    @Override public List<PartitionInfo> partitionsFor(String topic, Duration timeout) { return delegate.partitionsFor(topic, timeout); }
    @Override public Map<String, List<PartitionInfo>> listTopics() { return delegate.listTopics(); }
    @Override public Map<String, List<PartitionInfo>> listTopics(Duration timeout) { return delegate.listTopics(timeout); }
    @Override public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(Map<TopicPartition, Long> timestampsToSearch) { return delegate.offsetsForTimes(timestampsToSearch); }
    @Override public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(Map<TopicPartition, Long> timestampsToSearch, Duration timeout) { return delegate.offsetsForTimes(timestampsToSearch, timeout); }
    @Override public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions) { return delegate.beginningOffsets(partitions); }
    @Override public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions, Duration timeout) { return delegate.beginningOffsets(partitions, timeout); }
    @Override public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions) { return delegate.endOffsets(partitions); }
    @Override public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions, Duration timeout) { return delegate.endOffsets(partitions, timeout); }
    @Override
    public OptionalLong currentLag(TopicPartition topicPartition) {
        OptionalLong lag = delegate.currentLag(topicPartition);
        return lag.isPresent() ? OptionalLong.of(positions.lag(topicPartition, lag.getAsLong())) : lag;
    }

    @Override public ConsumerGroupMetadata groupMetadata() { return delegate.groupMetadata(); }
    @Override public void enforceRebalance() { delegate.enforceRebalance(); }
    @Override public void enforceRebalance(String reason) { delegate.enforceRebalance(reason); }
    @Override public void wakeup() { delegate.wakeup(); }

    @Override public Set<TopicPartition> paused() { return served.paused(); }
    /** Validates the assignment exactly as KafkaConsumer does. */
    @Override public void pause(Collection<TopicPartition> partitions) { served.pause(partitions); }
    @Override public void resume(Collection<TopicPartition> partitions) { served.resume(partitions); }

    // close() and close(Duration) avoid CloseOptions, which kafka-clients 3.9 (Spring Boot 3.5's line) lacks: they
    // are what Spring Kafka 3.3 calls, so the class runs there unchanged. close(Duration) is deprecated in 4.x.
    @Override
    public void close() {
        close(Duration.ofSeconds(30));
    }

    /** @deprecated as in {@link Consumer#close(Duration)}: use {@link #close(CloseOptions)}. */
    @Deprecated
    @Override
    @SuppressWarnings("deprecation")
    public void close(Duration timeout) {
        try {
            commitBeforeClose();
            delegate.close(timeout);
        } finally {
            closeOwnResources();
        }
    }

    @Override
    public void close(CloseOptions options) {
        try {
            commitBeforeClose();
            delegate.close(options);
        } finally {
            closeOwnResources();
        }
    }

    /** KafkaConsumer auto-commits as it closes; the internal one no longer does. Nothing here keeps it from closing. */
    private void commitBeforeClose() {
        try {
            if (autoCommit != null && !closing) {
                autoCommit.now("as the consumer closes");
            }
        } catch (RuntimeException e) {
            LOG.warn("auto-commit as the consumer closes failed: {}", e.toString());
        } finally {
            closing = true;
        }
    }

    private void closeOwnResources() {
        readLog.closed();
        for (ConsumerInterceptor<K, V> i : interceptors) {
            try {
                i.close();
            } catch (Exception e) {
                LOG.warn("Failed to close interceptor", e);
            }
        }
        if (fetcher != null) {
            fetcher.close();
        }
        if (transport != null) {
            transport.close();
        }
        rdmaMetrics.close();
    }
}
