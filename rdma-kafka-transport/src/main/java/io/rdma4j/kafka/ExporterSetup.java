package io.rdma4j.kafka;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.kafka.protocol.ExporterAuthentication;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * What makes a connection to a log exporter ready, off the polling thread, so that a consumer's start and a token's
 * replacement never hold up its poll: connecting (on the transport's threads), creating or replacing the delegation
 * token (the consumer's setup thread: one daemon thread, there only while there is work), proving it (two requests,
 * chained on their replies), the proof having an exporter that checks ACLs decide on the consumer's topics. Each step ends in
 * a {@link Setup} that {@link ExporterConnections} takes over on the polling thread; nothing here touches its state.
 * A consumer that proves no token has no setup thread.
 */
final class ExporterSetup implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(ExporterSetup.class);
    /** How long close() waits for the setup thread to let go of the consumer's token (it goes on by itself after). */
    private static final long CLOSE_WAIT_MS = 2_000;

    /** What a proof came to. */
    enum Proof {
        /** Nothing was proven: the consumer proves no token. */
        NONE,
        /** The exporter took the token and checks Kafka ACLs. */
        CHECKED,
        /** The exporter checks no ACLs (its answer or its error says so): nothing is read from it. */
        NOT_CHECKING,
        /** The exporter did not take the token (not known to its broker yet, expired, deleted). */
        REFUSED,
        /** No token could be created (logged by the credentials). */
        NO_TOKEN
    }

    /** An open connection, the token proven on it (or tried, or null) and how that went; {@code detail} for logs. */
    record Setup(RdmaConnection connection, DelegationToken token, Proof proof, String detail) {
    }

    private final RdmaTransport transport;
    /** Null when the consumer proves nothing. */
    private final DelegationTokenCredentials credentials;
    /** The setup thread, which alone calls the credentials' cluster calls; null with no credentials. */
    private final ThreadPoolExecutor thread;

    ExporterSetup(RdmaTransport transport, DelegationTokenCredentials credentials) {
        this.transport = transport;
        this.credentials = credentials;
        this.thread = credentials == null ? null : new ThreadPoolExecutor(0, 1, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                Thread.ofPlatform().daemon().name("rdma4j-kafka-setup").factory());
    }

    /**
     * Connects to {@code exporter} and proves the token there when the consumer proves one; {@code reading}: the
     * partitions to be read from it, whose topics the exporter is asked to decide on ({@link #prove}).
     */
    CompletableFuture<Setup> connect(InetSocketAddress exporter, Collection<TopicPartition> reading) {
        CompletableFuture<RdmaConnection> connecting;
        try {
            connecting = transport.connect(exporter); // Fails by itself after the transport's connect timeout.
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        if (credentials == null) {
            return connecting.thenApply(c -> new Setup(c, null, Proof.NONE, ""));
        }
        return connecting.thenCompose(c -> {
            CompletableFuture<Setup> proving;
            try {
                proving = prove(c, reading);
            } catch (RuntimeException e) { // The consumer closed meanwhile.
                c.close();
                throw e;
            }
            return proving.whenComplete((s, e) -> {
                if (e != null) {
                    c.close();
                }
            });
        });
    }

    /**
     * Proves the current token on {@code c}, creating or replacing it first where due. The proof names the topics of
     * {@code reading}, on which an exporter that checks ACLs decides before it answers (and keeps the decision for a
     * while): deciding for a principal it has not decided for takes it around 100 ms (it asks the cluster as the
     * token), and the polling thread's first fetch from it need not wait for that.
     */
    CompletableFuture<Setup> prove(RdmaConnection c, Collection<TopicPartition> reading) {
        List<String> topics = reading.stream().map(TopicPartition::topic).distinct()
                .limit(ExporterAuthentication.MAX_TOPICS_PER_PROOF).toList();
        return CompletableFuture.supplyAsync(credentials::current, thread).thenCompose(token -> token == null
                ? CompletableFuture.completedFuture(new Setup(c, null, Proof.NO_TOKEN, "no delegation token"))
                : proveToken(c, token, topics));
    }

    /** Creates the token, or replaces it where due, without proving it anywhere yet. */
    CompletableFuture<Void> renew() {
        return CompletableFuture.runAsync(credentials::current, thread);
    }

    /** Lets go of {@code old}, which no connection of this consumer holds any more. */
    CompletableFuture<Void> letGo(DelegationToken old) {
        return CompletableFuture.runAsync(() -> credentials.letGo(old), thread);
    }

    /** A challenge, then the proof over its nonce; a failure of the connection itself fails the future. */
    private static CompletableFuture<Setup> proveToken(RdmaConnection c, DelegationToken token, List<String> topics) {
        String id = token.tokenInfo().tokenId();
        return c.request(RequestTypes.KAFKA_AUTHENTICATE, ByteBuffer.wrap(new ExporterAuthentication.Challenge().toBytes()))
                .thenCompose(nonce -> c.request(RequestTypes.KAFKA_AUTHENTICATE, ByteBuffer.wrap(new ExporterAuthentication.Proof(id,
                        ExporterAuthentication.proof(token.hmac(), ExporterAuthentication.nonce(nonce), id), topics).toBytes())))
                .handle((answer, error) -> verdict(c, token, answer, error));
    }

    /** What the exporter's answer to a proof says; an error of the connection itself is thrown on. */
    private static Setup verdict(RdmaConnection c, DelegationToken token, ByteBuffer answer, Throwable error) {
        Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        try {
            if (cause == null) {
                ExporterAuthentication.Verdict verdict = ExporterAuthentication.Verdict.fromBytes(answer);
                return verdict == ExporterAuthentication.Verdict.ACLS_CHECKED ? new Setup(c, token, Proof.CHECKED, "")
                        : new Setup(c, token, Proof.NOT_CHECKING, "it answered " + verdict);
            }
        } catch (ProtocolException e) {
            cause = e;
        }
        if (cause instanceof ProtocolException e) {
            return new Setup(c, token, Proof.NOT_CHECKING, e.getMessage());
        }
        if (cause instanceof RemoteRequestException e) {
            return e.status() == RemoteRequestException.Status.REFUSED ? new Setup(c, token, Proof.REFUSED, e.getMessage())
                    : new Setup(c, token, Proof.NOT_CHECKING, e.status() == RemoteRequestException.Status.HANDLER_FAILED
                    ? "it failed on the proof, as an exporter of an older rdma4j version does (run the same rdma4j version "
                    + "on consumers and exporters): " + e.getMessage()
                    : "it takes no delegation token (" + e.getMessage() + ")");
        }
        throw cause instanceof RuntimeException r ? r : new CompletionException(cause);
    }

    /**
     * Lets the setup thread finish what it does (a token being created is not abandoned: the cluster would keep it),
     * then let go of the consumer's token (the last consumer sharing it expires it, now or after the linger), waiting
     * for that only briefly. Connections still being set up are the
     * caller's to discard; a connect under way ends with the transport.
     */
    @Override
    public void close() {
        if (thread == null) {
            return;
        }
        credentials.closing();
        thread.execute(credentials::close);
        thread.shutdown();
        try {
            if (!thread.awaitTermination(CLOSE_WAIT_MS, TimeUnit.MILLISECONDS)) {
                LOG.debug("the rdma4j setup thread lets go of the consumer's delegation token after close returned");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
