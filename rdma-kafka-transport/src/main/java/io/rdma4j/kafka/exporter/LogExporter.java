package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RequestContext;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.TransactionIndexEntry;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Exports a broker's log for one-sided reads: maps every partition's segment files read-only, registers
 * what lies below the high watermark ({@link PartitionExport}), and publishes per partition a watermark record (high
 * watermark with its byte position, log start offset, last stable offset, leader) learnt from the broker through the
 * Admin API every
 * {@code rdma.exporter.watermark.interval.ms}. Consumers find segments with a
 * {@link RequestTypes#KAFKA_DIRECTORY} request ({@link SegmentDirectory}) on the rdma4j connection. The broker
 * itself is not modified and never notices.
 */
public final class LogExporter implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(LogExporter.class);
    // <topic>-<partition>; deleted (…-delete), future (…-future) and stray directories carry a suffix and do not match.
    private static final Pattern PARTITION_DIR = Pattern.compile("(.+)-(\\d+)");
    /**
     * How often the partitions' leaders are learnt (one metadata request): consumers that read from a leader's exporter
     * move to the new leader's within about this much after an election.
     */
    private static final long LEADERS_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(1);
    /**
     * The longest a refresh waits for the broker's answers. A partition whose leader just died is not answered until
     * the cluster elects another (seconds); meanwhile it keeps its last watermark, and the other partitions' watermarks
     * move on.
     */
    private static final long ANSWER_WAIT_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final ExporterConfig config;
    private final RdmaTransport transport;
    private final SegmentMapper mapper;
    private final Admin admin;
    /** Whether a topic is served only to consumers that may READ it ({@code rdma.exporter.acls}). */
    private final AclGate acls;
    private final ConnectionLog connections;
    private final IdleConsumers idle;
    private final RdmaListener listener;
    private final ScheduledExecutorService refresher;
    private final Map<TopicPartition, PartitionExport> partitions = new ConcurrentHashMap<>();
    private final RetiredRegions retired;
    private final AtomicLong adminRequests = new AtomicLong();
    private final AtomicLong refreshes = new AtomicLong();
    private final AtomicLong directoryRequests = new AtomicLong();
    private final AtomicLong abortedTransactionRequests = new AtomicLong();
    private final TransactionIndexScanner transactionIndexes = new TransactionIndexScanner(PartitionExport::fileKey);
    private final long startedNanos = System.nanoTime();
    /** Each exported partition's leader (node id), as last learnt; a partition whose leader is unknown is absent. */
    private volatile Map<TopicPartition, Integer> leaders = Map.of();
    /** When the leaders were last learnt; the first refresh learns them. */
    private long leadersLearntNanos = System.nanoTime() - LEADERS_INTERVAL_NANOS;
    private volatile boolean closed;
    /** Set once the constructor has made the Admin client and ACL gate that requests need. */
    private volatile boolean ready;

    /**
     * How long a sidecar's start waits for the cluster to say whether it has an authorizer
     * ({@code rdma.exporter.acls=auto}); a silent cluster is asked on, and meanwhile nothing is served.
     */
    private static final java.time.Duration ACL_DECISION_WAIT = java.time.Duration.ofSeconds(15);

    /**
     * Starts an exporter on its own transport, once it knows whether to check ACLs.
     *
     * @throws IllegalStateException when the cluster has an authorizer and this exporter cannot check it (what to set)
     */
    public static LogExporter start(ExporterConfig config) {
        return start(config, SegmentMapper.PAGE_CACHE);
    }

    /** Starts an exporter inside a broker that is not serving yet: whether to check ACLs is learnt once it is (nothing served meanwhile). */
    static LogExporter startInBroker(ExporterConfig config) {
        return open(config, SegmentMapper.PAGE_CACHE);
    }

    /** Starts an exporter that registers segment files with {@code mapper} (tests export tampered copies). */
    public static LogExporter start(ExporterConfig config, SegmentMapper mapper) {
        LogExporter exporter = open(config, mapper);
        try {
            exporter.acls.awaitDecision(ACL_DECISION_WAIT);
            return exporter;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            exporter.close();
            throw new IllegalStateException("interrupted while the log exporter was starting", e);
        } catch (RuntimeException e) {
            exporter.close();
            throw e;
        }
    }

    private static LogExporter open(ExporterConfig config, SegmentMapper mapper) {
        RdmaTransport transport = RdmaTransport.open(config.transport());
        try {
            return new LogExporter(config, transport, mapper);
        } catch (RuntimeException e) {
            transport.close();
            throw e;
        }
    }

    private LogExporter(ExporterConfig config, RdmaTransport transport, SegmentMapper mapper) {
        this.config = config;
        this.transport = transport;
        this.mapper = mapper;
        Map<String, Object> adminProps = new HashMap<>(config.adminProperties());
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        adminProps.putIfAbsent(AdminClientConfig.CLIENT_ID_CONFIG, "rdma4j-log-exporter");
        // A refresh stops waiting after ANSWER_WAIT_NANOS; the requests it left behind must not linger for a minute.
        adminProps.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        adminProps.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        this.connections = new ConnectionLog(this::principal);
        // Every exporter answers proofs, with whether it checks: consumers that prove a token read only where it does.
        // Listening comes first, so that a port in use fails the start before the Admin client reaches for the cluster;
        // a request in the moment before the Admin client exists is refused (the consumer falls back, then retries).
        this.idle = new IdleConsumers(config.connectionsMaxIdle());
        this.retired = new RetiredRegions(config.retireGrace());
        RequestHandlers handlers = RequestHandlers.of(RequestTypes.KAFKA_DIRECTORY, idle.touching((body, context) -> started().answerDirectory(body, context)))
                .and(RequestTypes.KAFKA_ABORTED_TRANSACTIONS, idle.touching((body, context) -> started().answerAbortedTransactions(body, context)))
                .and(RequestTypes.KAFKA_AUTHENTICATE, idle.touching((body, context) -> started().acls.authenticate(body, context)))
                .and(RequestTypes.KAFKA_KEEPALIVE, idle.touching(IdleConsumers.KEEPALIVE));
        this.listener = transport.listen(config.listenAddress(), handlers, connections.accepting(idle::accepted));
        try {
            this.admin = Admin.create(adminProps);
            this.acls = new AclGate(config, admin, adminProps);
        } catch (RuntimeException e) {
            listener.close();
            throw e;
        }
        this.ready = true;
        this.refresher = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "rdma4j-log-exporter");
            t.setDaemon(true);
            return t;
        });
        refresher.scheduleWithFixedDelay(this::refreshQuietly, 0, config.watermarkInterval().toMillis(), TimeUnit.MILLISECONDS);
        LOG.info("rdma4j log exporter on {} via {} exporting {}", listener.localAddress(), transport.selection(), config.logDirs());
    }

    /** Where consumers connect ({@code rdma.exporter.address}). */
    public InetSocketAddress address() {
        return listener.localAddress();
    }

    public RdmaTransport transport() {
        return transport;
    }

    /**
     * Admin requests sent so far: three per refresh (latest, latest read_committed, earliest), and one a second for the
     * partitions' leaders.
     */
    public long adminRequests() {
        return adminRequests.get();
    }

    /** Consumer connections closed after {@code rdma.exporter.connections.max.idle.ms} without a request. */
    public long idleConnectionsClosed() {
        return idle.closed();
    }

    public long refreshes() {
        return refreshes.get();
    }

    public long directoryRequests() {
        return directoryRequests.get();
    }

    /** Aborted-transaction requests answered or refused so far (read_committed consumers ask them). */
    public long abortedTransactionRequests() {
        return abortedTransactionRequests.get();
    }

    /** Consumer connections that proved a delegation token ({@code rdma.exporter.acls=true}; 0 otherwise). */
    public long authenticatedConnections() {
        return acls.authenticated();
    }

    /** Delegation token proofs refused: no such live token, a wrong proof, or no challenge asked. */
    public long rejectedTokenProofs() {
        return acls.rejectedProofs();
    }

    /** Times the exporter described the cluster's delegation tokens for proofs and ACL checks (at most ten a second). */
    public long delegationTokenLookups() {
        return acls.tokenListFetches();
    }

    /** Directory and aborted-transactions requests refused because the requester may not READ the topic. */
    public long aclRefusals() {
        return acls.refusals();
    }

    /** Admin requests per second since start: the broker-side cost of the watermark freshness. */
    public double adminRequestsPerSecond() {
        return adminRequests.get() / Math.max(1e-9, (System.nanoTime() - startedNanos) / 1e9);
    }

    /** Segment registrations replaced because the high watermark moved (a segment is registered only below it). */
    public long remaps() {
        return partitions.values().stream().mapToLong(PartitionExport::remaps).sum();
    }

    public int exportedPartitions() {
        return partitions.size();
    }

    /**
     * The high watermark this exporter currently serves for {@code tp} (consumers read up to it by RDMA),
     * or -1 while the partition is not exported yet.
     */
    public long exportedHighWatermark(TopicPartition tp) {
        PartitionExport p = partitions.get(tp);
        var published = p == null ? null : p.published();
        return published == null ? -1 : published.highWatermark();
    }

    /** The log start offset this exporter currently serves for {@code tp}, or -1 while the partition is not exported yet. */
    public long exportedLogStart(TopicPartition tp) {
        PartitionExport p = partitions.get(tp);
        var published = p == null ? null : p.published();
        return published == null ? -1 : published.logStartOffset();
    }

    /** The leader this exporter publishes for {@code tp}, or {@link Watermark#UNKNOWN_LEADER}. */
    public int exportedLeader(TopicPartition tp) {
        return leaders.getOrDefault(tp, Watermark.UNKNOWN_LEADER);
    }

    /** Runs one refresh now (tests use it to avoid waiting). */
    public void refresh() throws IOException, InterruptedException {
        discoverPartitions();
        if (partitions.isEmpty()) {
            retired.closeDue(false);
            return;
        }
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
        java.util.List<TopicPartition> asked = java.util.List.copyOf(partitions.keySet());
        for (TopicPartition tp : asked) {
            latest.put(tp, OffsetSpec.latest());
            earliest.put(tp, OffsetSpec.earliest());
        }
        // Learnt before the files are looked at, so the segment list is at least as new as the high watermark. Asked
        // at once and awaited together, each partition on its own: one without an answer must not hold back the others.
        long deadline = System.nanoTime() + ANSWER_WAIT_NANOS;
        ListOffsetsResult hwAnswer = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED));
        ListOffsetsResult lsoAnswer = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED));
        ListOffsetsResult startAnswer = admin.listOffsets(earliest);
        adminRequests.addAndGet(3);
        boolean learnLeaders = System.nanoTime() - leadersLearntNanos >= LEADERS_INTERVAL_NANOS;
        var leadersAnswer = learnLeaders ? describe(asked) : null;
        Map<TopicPartition, Long> hw = offsets(hwAnswer, asked, deadline);
        Map<TopicPartition, Long> lso = offsets(lsoAnswer, asked, deadline);
        Map<TopicPartition, Long> start = offsets(startAnswer, asked, deadline);
        if (learnLeaders) {
            leaders = leaders(leadersAnswer, deadline);
            leadersLearntNanos = System.nanoTime();
            adminRequests.incrementAndGet();
        }
        Map<TopicPartition, Integer> leader = leaders;
        IOException failed = null;
        for (PartitionExport p : partitions.values()) {
            // Synced and published under the partition's lock as one step: a segment the cleaner just swapped in is
            // registered only by the publish, and a directory request in between would find the offsets it holds
            // not exported and send the consumer to Kafka's fetch path for a whole fallback period.
            synchronized (p) {
                try {
                    p.syncSegments();
                    Long h = hw.get(p.partition());
                    if (h != null && start.containsKey(p.partition())) {
                        // Without the broker's last stable offset the previous one stands: the high watermark in its
                        // place would show read_committed consumers open transactions.
                        Long stable = lso.get(p.partition());
                        var before = p.published();
                        long lastStable = stable != null ? stable : before != null ? before.lastStableOffset() : start.get(p.partition());
                        p.publish(h, start.get(p.partition()), lastStable,
                                leader.getOrDefault(p.partition(), Watermark.UNKNOWN_LEADER));
                        if (before == null && p.published() != null) {
                            LOG.info("exporting {} (offsets {} to {})", p.partition(), start.get(p.partition()), h);
                        }
                    }
                } catch (IOException e) {
                    // One partition's files (truncated, vanishing) must not hold back the others' watermarks.
                    if (failed == null) {
                        failed = e;
                    } else {
                        failed.addSuppressed(e);
                    }
                }
            }
        }
        refreshes.incrementAndGet();
        retired.closeDue(false);
        if (failed != null) {
            throw failed;
        }
    }

    // One partition failing (being deleted, its leader gone) must not stop the others from being refreshed.
    private static Map<TopicPartition, Long> offsets(ListOffsetsResult result, Iterable<TopicPartition> asked, long deadline)
            throws InterruptedException {
        Map<TopicPartition, Long> out = new HashMap<>();
        for (TopicPartition tp : asked) {
            try {
                out.put(tp, result.partitionResult(tp).get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS).offset());
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                    LOG.debug("no offsets for {}: {}", tp, e.getCause().toString());
                }
            } catch (java.util.concurrent.TimeoutException e) {
                LOG.debug("no offsets for {} within {} ms; it keeps its last watermark", tp, TimeUnit.NANOSECONDS.toMillis(ANSWER_WAIT_NANOS));
            }
        }
        return out;
    }

    private Map<String, org.apache.kafka.common.KafkaFuture<org.apache.kafka.clients.admin.TopicDescription>> describe(
            java.util.List<TopicPartition> asked) {
        java.util.Set<String> topics = new java.util.HashSet<>();
        asked.forEach(tp -> topics.add(tp.topic()));
        return admin.describeTopics(topics).topicNameValues();
    }

    /** The partitions' leaders from the cluster's metadata; a topic not described in time is left out (leader unknown). */
    private static Map<TopicPartition, Integer> leaders(
            Map<String, org.apache.kafka.common.KafkaFuture<org.apache.kafka.clients.admin.TopicDescription>> described,
            long deadline) throws InterruptedException {
        Map<TopicPartition, Integer> out = new HashMap<>();
        for (var e : described.entrySet()) {
            try {
                var description = e.getValue().get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                for (TopicPartitionInfo info : description.partitions()) {
                    if (info.leader() != null && !info.leader().isEmpty()) {
                        out.put(new TopicPartition(e.getKey(), info.partition()), info.leader().id());
                    }
                }
            } catch (ExecutionException | java.util.concurrent.TimeoutException ex) {
                LOG.debug("no leaders for topic {}: {}", e.getKey(), ex.toString());
            }
        }
        return out;
    }

    private void discoverPartitions() throws IOException {
        Map<TopicPartition, Path> found = new HashMap<>();
        for (Path dir : config.logDirs()) {
            if (!Files.isDirectory(dir)) {
                continue;
            }
            try (var entries = Files.list(dir)) {
                for (Path p : (Iterable<Path>) entries::iterator) {
                    Matcher m = PARTITION_DIR.matcher(p.getFileName().toString());
                    // The metadata log is never a partition to read; other internal topics only when configured.
                    if (m.matches() && Files.isDirectory(p) && !m.group(1).startsWith("__cluster_metadata")
                            && (config.exportInternalTopics() || !ExporterConfig.isInternalTopic(m.group(1)))) {
                        found.put(new TopicPartition(m.group(1), Integer.parseInt(m.group(2))), p);
                    }
                }
            }
        }
        for (var e : found.entrySet()) {
            partitions.computeIfAbsent(e.getKey(), tp -> new PartitionExport(tp, e.getValue(), transport, mapper, retired,
                    config.retireGrace()));
        }
        for (var it = partitions.entrySet().iterator(); it.hasNext(); ) {
            var e = it.next();
            if (!found.containsKey(e.getKey())) {
                it.remove();
                e.getValue().close();
            }
        }
    }

    private void refreshQuietly() {
        if (closed) {
            return;
        }
        try {
            acls.sweep();
            connections.sweep();
            idle.closeIdle();
            refresh();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception | InternalError e) {
            // Whatever one refresh meets (an InternalError is the JVM's report of a fault in mapped memory), the
            // scheduled refreshes go on: a task that threw would never run again.
            LOG.warn("watermark refresh failed (retrying in {} ms): {}", config.watermarkInterval().toMillis(), e.toString());
        }
    }

    /** The Kafka principal whose delegation token {@code connection} proved, or null. */
    private String principal(io.rdma4j.core.RdmaConnection connection) {
        return acls.principal(connection);
    }

    private LogExporter started() {
        if (!ready) {
            throw new RequestRefusedException("the log exporter is starting; fetch through Kafka meanwhile");
        }
        return this;
    }

    /** The export a request names, or null when this exporter does not serve that partition; refused while closing. */
    private PartitionExport exportFor(String topic, int partition) {
        if (closed) {
            throw new RequestRefusedException("the log exporter is closing; fetch through Kafka");
        }
        return partitions.get(new TopicPartition(topic, partition));
    }

    private CompletionStage<ByteBuffer> answerDirectory(ByteBuffer message, RequestContext context) {
        directoryRequests.incrementAndGet();
        connections.directoryRequested(context);
        SegmentDirectory.Request request = SegmentDirectory.Request.fromBytes(message);
        return whenAllowed(context, request.topic(), () -> answer(request), denial -> new SegmentDirectory.Response(
                SegmentDirectory.Status.NOT_AUTHORIZED, null, -1, java.util.List.of()).toBytes());
    }

    private CompletionStage<ByteBuffer> answerAbortedTransactions(ByteBuffer message, RequestContext context) {
        abortedTransactionRequests.incrementAndGet();
        AbortedTransactions.Request request = AbortedTransactions.Request.fromBytes(message);
        return whenAllowed(context, request.topic(), () -> answer(request),
                denial -> AbortedTransactions.Response.of(AbortedTransactions.Status.NOT_AUTHORIZED).toBytes());
    }

    /** {@code answer} where the requester may read {@code topic} (always without ACL checks), else {@code refusal}. */
    private CompletionStage<ByteBuffer> whenAllowed(RequestContext context, String topic, Supplier<ByteBuffer> answer,
                                                    Function<String, byte[]> refusal) {
        return acls.denial(context, topic).thenApply(denial -> {
            if (denial == null) {
                return answer.get();
            }
            LOG.debug("refused {} to {}: {}", topic, context.peer().address(), denial);
            return ByteBuffer.wrap(refusal.apply(denial));
        });
    }

    private ByteBuffer answer(SegmentDirectory.Request request) {
        PartitionExport p = exportFor(request.topic(), request.partition());
        if (p == null) {
            return ByteBuffer.wrap(new SegmentDirectory.Response(SegmentDirectory.Status.UNKNOWN_PARTITION, null, -1,
                    java.util.List.of()).toBytes());
        }
        return ByteBuffer.wrap(p.directory(request.fromOffset()).toBytes());
    }

    private ByteBuffer answer(AbortedTransactions.Request request) {
        PartitionExport p = exportFor(request.topic(), request.partition());
        if (p == null) {
            return ByteBuffer.wrap(AbortedTransactions.Response.of(AbortedTransactions.Status.UNKNOWN_PARTITION).toBytes());
        }
        var segments = p.transactionIndexSegments(request.fromOffset());
        if (segments.isEmpty()) {
            return ByteBuffer.wrap(AbortedTransactions.Response.of(AbortedTransactions.Status.OFFSET_NOT_EXPORTED).toBytes());
        }
        try {
            return ByteBuffer.wrap(transactionIndexes.scan(segments, request.fromOffset(), request.toOffset(),
                    AbortedTransactions.maxPerResponse(transport.config().maxMessageSize())).toBytes());
        } catch (IOException | TransactionIndexEntry.MalformedEntryException e) {
            LOG.warn("cannot read the transaction index of {}: {}", p.partition(), e.toString());
            throw new RequestRefusedException("the transaction index of " + p.partition() + " cannot be read: " + e.getMessage());
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        refresher.shutdownNow();
        try {
            refresher.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        listener.close();
        acls.close();
        admin.close(java.time.Duration.ofSeconds(5));
        partitions.values().forEach(PartitionExport::close);
        partitions.clear();
        retired.closeDue(true);
        transport.close();
    }
}
