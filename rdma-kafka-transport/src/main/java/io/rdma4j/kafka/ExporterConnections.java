package io.rdma4j.kafka;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.kafka.protocol.ExporterAuthentication;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A consumer's connections to log exporters, one per exporter address (one per broker it reads from). An exporter
 * that could not be reached is tried again only after {@code rdma.fetch.fallback.backoff.ms}, so a dead broker costs
 * one connect timeout per backoff period, not one per poll. With {@link DelegationTokenCredentials} each connection
 * proves the current token ({@link ExporterAuthentication}) before it is used, and again once the token is replaced;
 * an exporter that does not answer that it checks Kafka ACLs is then not used at all ({@link #whyNot}), since it would
 * serve this consumer topics its principal may not read. Used by the polling thread only.
 */
final class ExporterConnections implements AutoCloseable {

    /**
     * When to reconnect, to say the consumer is still there, and to let go of an exporter: after
     * {@code rdma.fetch.fallback.backoff.ms} an unreachable exporter is tried again; every {@code rdma.fetch.keepalive.ms}
     * a connection used since gets a keepalive (READs alone do not reach the exporter, which closes connections idle for
     * its {@code rdma.exporter.connections.max.idle.ms}); one unused for the consumer's {@code connections.max.idle.ms}
     * (no assigned partition on that broker) is closed, as KafkaConsumer closes idle connections to brokers.
     */
    record Timing(Duration reconnectBackoff, Duration keepAlive, Duration maxIdle) {
        static Timing of(Duration reconnectBackoff) {
            return new Timing(reconnectBackoff, Duration.ofSeconds(60), Duration.ofMillis(540_000));
        }
    }

    private static final Logger LOG = LoggerFactory.getLogger(ExporterConnections.class);

    private final RdmaTransport transport;
    private final Duration reconnectBackoff;
    private final Timing timing;
    private final Runnable onReconnect;
    private final Map<InetSocketAddress, Long> lastUsedNanos = new HashMap<>();
    private final Map<InetSocketAddress, Long> lastKeepAliveNanos = new HashMap<>();
    /** Exporters this consumer was connected to once: connecting to one again counts as a reconnect. */
    private final java.util.Set<InetSocketAddress> connectedBefore = new java.util.HashSet<>();
    private final Map<InetSocketAddress, RdmaConnection> open = new HashMap<>();
    private final Map<InetSocketAddress, Long> retryAtNanos = new HashMap<>();
    /** Null when the consumer proves nothing (exporters that check ACLs then refuse it). */
    private final DelegationTokenCredentials credentials;
    /** The token each open connection proved. */
    private final Map<InetSocketAddress, DelegationToken> proven = new HashMap<>();
    /** When a refused proof is tried again. */
    private final Map<InetSocketAddress, Long> proofRetryAtNanos = new HashMap<>();
    /** Exporters whose answer to a proof did not say they check ACLs (until the connection to them is dropped). */
    private final java.util.Set<InetSocketAddress> unchecked = new java.util.HashSet<>();

    ExporterConnections(RdmaTransport transport, Timing timing, DelegationTokenCredentials credentials, Runnable onReconnect) {
        this.transport = transport;
        this.timing = timing;
        this.reconnectBackoff = timing.reconnectBackoff();
        this.credentials = credentials;
        this.onReconnect = onReconnect;
    }

    /**
     * The open connection to {@code exporter}, connecting if needed; null while it cannot be reached or, for a consumer
     * that proves a token, while it has no token or the exporter does not check ACLs ({@link #whyNot}).
     */
    RdmaConnection get(InetSocketAddress exporter) {
        long now = System.nanoTime();
        closeIdle(exporter, now);
        lastUsedNanos.put(exporter, now);
        RdmaConnection c = open.get(exporter);
        if (c != null && c.isOpen()) {
            keepAlive(exporter, c, now);
            return proveCurrentToken(exporter, c) ? c : null;
        }
        drop(exporter);
        Long retryAt = retryAtNanos.get(exporter);
        if (retryAt != null && System.nanoTime() - retryAt < 0) {
            return null;
        }
        try {
            c = transport.connect(exporter).get(transport.config().connectTimeout().toMillis() + 1000, TimeUnit.MILLISECONDS);
            open.put(exporter, c);
            retryAtNanos.remove(exporter);
            lastKeepAliveNanos.put(exporter, System.nanoTime());
            if (!connectedBefore.add(exporter)) {
                onReconnect.run();
            }
            return proveCurrentToken(exporter, c) ? c : null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (Exception e) {
            retryAtNanos.put(exporter, System.nanoTime() + reconnectBackoff.toNanos());
            LOG.debug("cannot reach the rdma4j log exporter at {}: {}", exporter, e.toString());
            return null;
        }
    }

    /**
     * Proves the current token on {@code c} unless it did already. A refused proof is logged and leaves the connection
     * unproven: an exporter that checks ACLs then answers NOT_AUTHORIZED, and one that does not never asked. A
     * connection that fails meanwhile is dropped (false), and the exporter is tried again after the backoff.
     */
    private boolean proveCurrentToken(InetSocketAddress exporter, RdmaConnection c) {
        if (credentials == null) {
            return true;
        }
        DelegationToken token = credentials.current();
        if (token == null) {
            return false; // Logged by the credentials: nothing proves that an exporter checks ACLs for this consumer.
        }
        Long retryAt = proofRetryAtNanos.get(exporter);
        if (token == proven.get(exporter) && (retryAt == null || System.nanoTime() - retryAt < 0)) {
            return !unchecked.contains(exporter);
        }
        proofRetryAtNanos.remove(exporter);
        try {
            byte[] nonce = ExporterAuthentication.nonce(c.requestAndWait(RequestTypes.KAFKA_AUTHENTICATE,
                    ByteBuffer.wrap(new ExporterAuthentication.Challenge().toBytes())));
            String id = token.tokenInfo().tokenId();
            ExporterAuthentication.Verdict verdict = ExporterAuthentication.Verdict.fromBytes(c.requestAndWait(RequestTypes.KAFKA_AUTHENTICATE,
                    ByteBuffer.wrap(new ExporterAuthentication.Proof(id, ExporterAuthentication.proof(token.hmac(), nonce, id)).toBytes())));
            proven.put(exporter, token);
            if (verdict != ExporterAuthentication.Verdict.ACLS_CHECKED) {
                return notChecking(exporter, "it answered " + verdict);
            }
            unchecked.remove(exporter);
        } catch (ProtocolException e) {
            proven.put(exporter, token);
            return notChecking(exporter, e.getMessage());
        } catch (RemoteRequestException e) {
            proven.put(exporter, token); // Asked once per token and connection (and backoff), not once per poll.
            if (e.status() == RemoteRequestException.Status.REFUSED) {
                // A token just created reaches the exporter's broker a moment later: the proof is tried again after the
                // backoff, meanwhile the exporter answers NOT_AUTHORIZED and Kafka's fetch serves.
                proofRetryAtNanos.put(exporter, System.nanoTime() + reconnectBackoff.toNanos());
                credentials.refused(token);
                LOG.info("the rdma4j log exporter at {} refused delegation token {} (trying again in {} ms): {}", exporter,
                        token.tokenInfo().tokenId(), reconnectBackoff.toMillis(), e.getMessage());
            } else {
                return notChecking(exporter, "it takes no delegation token (" + e.getMessage() + ")");
            }
        } catch (RdmaException e) {
            drop(exporter);
            retryAtNanos.put(exporter, System.nanoTime() + reconnectBackoff.toNanos());
            LOG.debug("proving the delegation token to {} failed: {}", exporter, e.toString());
            return false;
        }
        return true;
    }

    private boolean notChecking(InetSocketAddress exporter, String why) {
        if (unchecked.add(exporter)) {
            LOG.warn("the rdma4j log exporter at {} checks no Kafka ACLs ({}): this consumer proves a delegation token "
                    + "(rdma.exporter.authentication=delegation-token), so it reads that exporter's partitions through Kafka; "
                    + "set rdma.exporter.acls=auto or true on the exporter", exporter, why);
        }
        return false;
    }

    /** Why {@link #get} answered null for {@code exporter}. */
    FallbackReason whyNot(InetSocketAddress exporter) {
        return unchecked.contains(exporter) ? FallbackReason.ACLS_NOT_CHECKED
                : credentials != null && open.containsKey(exporter) ? FallbackReason.NOT_AUTHORIZED : FallbackReason.EXPORTER_UNREACHABLE;
    }

    /** Tells the exporter this consumer is still there, when the last keepalive is older than the interval. */
    private void keepAlive(InetSocketAddress exporter, RdmaConnection c, long now) {
        Long last = lastKeepAliveNanos.get(exporter);
        if (last != null && now - last < timing.keepAlive().toNanos()) {
            return;
        }
        lastKeepAliveNanos.put(exporter, now);
        // Not waited for; an exporter too old to know the request answers it with an error, which changes nothing.
        c.request(RequestTypes.KAFKA_KEEPALIVE, new byte[0]).exceptionally(e -> null);
    }

    /** Closes the connections to exporters other than {@code inUse} that this consumer left unused for the idle limit. */
    private void closeIdle(InetSocketAddress inUse, long now) {
        for (InetSocketAddress exporter : List.copyOf(open.keySet())) {
            Long used = lastUsedNanos.get(exporter);
            if (!exporter.equals(inUse) && used != null && now - used >= timing.maxIdle().toNanos()) {
                LOG.debug("closing the connection to the rdma4j log exporter at {}: unused for {} ms (connections.max.idle.ms)",
                        exporter, timing.maxIdle().toMillis());
                drop(exporter);
                lastUsedNanos.remove(exporter);
            }
        }
    }

    /** Closes the connection to {@code exporter}, failing what is still in flight on it; whether there was one. */
    boolean drop(InetSocketAddress exporter) {
        RdmaConnection c = open.remove(exporter);
        proven.remove(exporter);
        unchecked.remove(exporter);
        proofRetryAtNanos.remove(exporter);
        if (c != null) {
            c.close();
        }
        return c != null;
    }

    @Override
    public void close() {
        List.copyOf(open.keySet()).forEach(this::drop);
        if (credentials != null) {
            credentials.close();
        }
    }
}
