package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.Watermark;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * Exports a broker's log for one-sided reads: maps every partition's segment files read-only, registers
 * what lies below the high watermark ({@link PartitionExport}), and publishes per partition a watermark record (high
 * watermark with its byte position, log start offset, last stable offset, leader) learnt from the broker through the
 * Admin API every {@code rdma.exporter.watermark.interval.ms}. Consumers find segments with a
 * {@link RequestTypes#KAFKA_DIRECTORY} request ({@link SegmentDirectory}) on the rdma4j connection. The broker
 * itself is not modified and never notices.
 *
 * <p>This class starts and closes the exporter's parts: {@link ExportedPartitions} (which partitions are exported),
 * {@link WatermarkRefresher} with {@link BrokerWatermarks} (their watermarks, learnt from the broker),
 * {@link ConsumerRequests} (what consumers ask), {@link AclGate} and {@link IdleConsumers}.
 */
public final class LogExporter implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(LogExporter.class);
    /**
     * How long a sidecar's start waits for the cluster to say whether it has an authorizer
     * ({@code rdma.exporter.acls=auto}); a silent cluster is asked on, and meanwhile nothing is served.
     */
    private static final Duration ACL_DECISION_WAIT = Duration.ofSeconds(15);

    private final RdmaTransport transport;
    private final Admin admin;
    /** Whether a topic is served only to consumers that may READ it ({@code rdma.exporter.acls}). */
    private final AclGate acls;
    private final IdleConsumers idle;
    private final ExportedPartitions partitions;
    private final ConsumerRequests requests;
    private final RdmaListener listener;
    private final BrokerWatermarks broker;
    private final WatermarkRefresher refresher;
    private final long startedNanos = System.nanoTime();
    private volatile boolean closed;

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
        this.transport = transport;
        Map<String, Object> adminProps = new HashMap<>(config.adminProperties());
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
        adminProps.putIfAbsent(AdminClientConfig.CLIENT_ID_CONFIG, "rdma4j-log-exporter");
        // A refresh stops waiting for the broker's answers after a second (BrokerWatermarks); the requests it left
        // behind must not linger for a minute.
        adminProps.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        adminProps.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        this.idle = new IdleConsumers(config.connectionsMaxIdle());
        this.partitions = new ExportedPartitions(config, transport, mapper);
        this.requests = new ConsumerRequests(partitions, transport);
        // Listening comes first, so that a port in use fails the start before the Admin client reaches for the cluster;
        // a request in the moment before the Admin client exists is refused (the consumer falls back, then retries).
        this.listener = transport.listen(config.listenAddress(), requests.handlers(idle), requests.accepting(idle::accepted));
        try {
            this.admin = Admin.create(adminProps);
            this.acls = new AclGate(config, admin, adminProps);
        } catch (RuntimeException e) {
            listener.close();
            throw e;
        }
        requests.serveWith(acls);
        this.broker = new BrokerWatermarks(admin);
        this.refresher = new WatermarkRefresher(partitions, broker, config.watermarkInterval(), this::sweep);
        refresher.start();
        LOG.info("rdma4j log exporter on {} via {} exporting {}", listener.localAddress(), transport.selection(), config.logDirs());
    }

    /** The exporter's periodic chores besides the refresh, run on the refresher's thread before each. */
    private void sweep() {
        acls.sweep();
        requests.sweep();
        idle.closeIdle();
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
        return broker.requests();
    }

    /** Consumer connections closed after {@code rdma.exporter.connections.max.idle.ms} without a request. */
    public long idleConnectionsClosed() {
        return idle.closed();
    }

    public long refreshes() {
        return refresher.refreshes();
    }

    public long directoryRequests() {
        return requests.directoryRequests();
    }

    /** Aborted-transaction requests answered or refused so far (read_committed consumers ask them). */
    public long abortedTransactionRequests() {
        return requests.abortedTransactionRequests();
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

    /**
     * READ decisions the exporter made by asking the cluster as a token's owner; each is kept for that principal and
     * topic for {@code rdma.exporter.acl.cache.ms}.
     */
    public long aclDecisions() {
        return acls.aclDecisions();
    }

    /**
     * Directory and aborted-transactions requests refused because the requester may not READ the topic, and topics a
     * token proof named that its owner may not READ.
     */
    public long aclRefusals() {
        return acls.refusals();
    }

    /** Admin requests per second since start: the broker-side cost of the watermark freshness. */
    public double adminRequestsPerSecond() {
        return broker.requests() / Math.max(1e-9, (System.nanoTime() - startedNanos) / 1e9);
    }

    /** Segment registrations replaced because the high watermark moved (a segment is registered only below it). */
    public long remaps() {
        return partitions.remaps();
    }

    public int exportedPartitions() {
        return partitions.size();
    }

    /**
     * The high watermark this exporter currently serves for {@code tp} (consumers read up to it by RDMA),
     * or -1 while the partition is not exported yet.
     */
    public long exportedHighWatermark(TopicPartition tp) {
        Watermark published = partitions.published(tp);
        return published == null ? -1 : published.highWatermark();
    }

    /** The log start offset this exporter currently serves for {@code tp}, or -1 while the partition is not exported yet. */
    public long exportedLogStart(TopicPartition tp) {
        Watermark published = partitions.published(tp);
        return published == null ? -1 : published.logStartOffset();
    }

    /** The leader this exporter publishes for {@code tp}, or {@link Watermark#UNKNOWN_LEADER}. */
    public int exportedLeader(TopicPartition tp) {
        return broker.leader(tp);
    }

    /** Runs one refresh now (tests use it to avoid waiting). */
    public void refresh() throws IOException, InterruptedException {
        refresher.refresh();
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        requests.stopServing();
        refresher.close();
        listener.close();
        acls.close();
        admin.close(Duration.ofSeconds(5));
        partitions.close();
        transport.close();
    }
}
