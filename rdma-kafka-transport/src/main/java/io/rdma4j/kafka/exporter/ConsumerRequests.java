package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RequestContext;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.kafka.protocol.TransactionIndexEntry;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * What the exporter answers on consumers' connections: segment directory and aborted-transaction requests for the
 * exported partitions, delegation token proofs and keepalives. Requests are refused while the exporter starts (until
 * {@link #serveWith} hands over the ACL gate) and once it closes; a topic the requester may not READ is refused by the
 * gate. Each connection is logged once ({@link ConnectionLog}).
 */
final class ConsumerRequests {

    // Logged as the exporter, whose logger operators configure.
    private static final Logger LOG = LoggerFactory.getLogger(LogExporter.class);

    private final ExportedPartitions partitions;
    private final RdmaTransport transport;
    private final ConnectionLog connections = new ConnectionLog(this::principal);
    private final TransactionIndexScanner transactionIndexes = new TransactionIndexScanner(PartitionExport::fileKey);
    private final AtomicLong directoryRequests = new AtomicLong();
    private final AtomicLong abortedTransactionRequests = new AtomicLong();
    /** Whether a topic is served only to consumers that may READ it; null until the exporter has made it. */
    private volatile AclGate acls;
    private volatile boolean closing;

    ConsumerRequests(ExportedPartitions partitions, RdmaTransport transport) {
        this.partitions = partitions;
        this.transport = transport;
    }

    /**
     * The handlers for the exporter's listener, each noting its request with {@code idle}. Every exporter answers
     * proofs, with whether it checks: consumers that prove a token read only where it does.
     */
    RequestHandlers handlers(IdleConsumers idle) {
        return RequestHandlers.of(RequestTypes.KAFKA_DIRECTORY, idle.touching((body, context) -> answerDirectory(started(), body, context)))
                .and(RequestTypes.KAFKA_ABORTED_TRANSACTIONS, idle.touching((body, context) -> answerAbortedTransactions(started(), body, context)))
                .and(RequestTypes.KAFKA_AUTHENTICATE, idle.touching((body, context) -> started().authenticate(body, context)))
                .and(RequestTypes.KAFKA_KEEPALIVE, idle.touching(IdleConsumers.KEEPALIVE));
    }

    /** What the listener runs for each accepted connection: logs it, then {@code next}. */
    Consumer<RdmaConnection> accepting(Consumer<RdmaConnection> next) {
        return connections.accepting(next);
    }

    /** Starts answering, with {@code acls} deciding who may read what. */
    void serveWith(AclGate acls) {
        this.acls = acls;
    }

    /** Refuses every request from now on: the exporter is closing. */
    void stopServing() {
        closing = true;
    }

    /** Forgets closed connections. */
    void sweep() {
        connections.sweep();
    }

    long directoryRequests() {
        return directoryRequests.get();
    }

    long abortedTransactionRequests() {
        return abortedTransactionRequests.get();
    }

    /** The Kafka principal whose delegation token {@code connection} proved, or null. */
    private String principal(RdmaConnection connection) {
        AclGate gate = acls;
        return gate == null ? null : gate.principal(connection);
    }

    private AclGate started() {
        AclGate gate = acls;
        if (gate == null) {
            throw new RequestRefusedException("the log exporter is starting; fetch through Kafka meanwhile");
        }
        return gate;
    }

    /** The export a request names, or null when this exporter does not serve that partition; refused while closing. */
    private PartitionExport exportFor(String topic, int partition) {
        if (closing) {
            throw new RequestRefusedException("the log exporter is closing; fetch through Kafka");
        }
        return partitions.get(new TopicPartition(topic, partition));
    }

    private CompletionStage<ByteBuffer> answerDirectory(AclGate acls, ByteBuffer message, RequestContext context) {
        directoryRequests.incrementAndGet();
        connections.directoryRequested(context);
        SegmentDirectory.Request request = SegmentDirectory.Request.fromBytes(message);
        return whenAllowed(acls, context, request.topic(), () -> answer(request), denial -> new SegmentDirectory.Response(
                SegmentDirectory.Status.NOT_AUTHORIZED, null, -1, List.of()).toBytes());
    }

    private CompletionStage<ByteBuffer> answerAbortedTransactions(AclGate acls, ByteBuffer message, RequestContext context) {
        abortedTransactionRequests.incrementAndGet();
        AbortedTransactions.Request request = AbortedTransactions.Request.fromBytes(message);
        return whenAllowed(acls, context, request.topic(), () -> answer(request),
                denial -> AbortedTransactions.Response.of(AbortedTransactions.Status.NOT_AUTHORIZED).toBytes());
    }

    /** {@code answer} where the requester may read {@code topic} (always without ACL checks), else {@code refusal}. */
    private static CompletionStage<ByteBuffer> whenAllowed(AclGate acls, RequestContext context, String topic,
                                                           Supplier<ByteBuffer> answer, Function<String, byte[]> refusal) {
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
                    List.of()).toBytes());
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
}
