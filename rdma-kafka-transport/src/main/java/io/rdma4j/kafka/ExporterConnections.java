package io.rdma4j.kafka;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.kafka.protocol.ExporterAuthentication;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * A consumer's connections to log exporters, one per exporter address (one per broker it reads from). The polling
 * thread never waits for one: {@link #get} answers null while the connection is set up ({@link ExporterSetup}: connected,
 * and the delegation token created and proven where the consumer proves one), and the partitions of that exporter are
 * fetched through Kafka meanwhile ({@link FallbackReason#EXPORTER_CONNECTING}, until {@link #settling} completes). An
 * exporter that could not be reached is tried again only after {@code rdma.fetch.fallback.backoff.ms}, so a dead broker
 * costs one connect timeout per backoff period, not one per poll. With {@link DelegationTokenCredentials} each
 * connection proves the current token ({@link ExporterAuthentication}) before it is used, and again once the token is
 * replaced (reading on with the replaced one meanwhile); an exporter that does not answer that it checks Kafka ACLs is
 * then not used at all ({@link #whyNot}), since it would serve this consumer topics its principal may not read.
 *
 * <p>Threads: every field here belongs to the polling thread. The setup's steps run elsewhere and hand their result
 * back only through the futures of the setups under way, which the polling thread takes over when done ({@link #takeOver}).
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

    private final ExporterSetup setup;
    private final Duration reconnectBackoff;
    private final Timing timing;
    private final Runnable onReconnect;
    private final Map<InetSocketAddress, Long> lastUsedNanos = new HashMap<>();
    private final Map<InetSocketAddress, Long> lastKeepAliveNanos = new HashMap<>();
    /** Exporters this consumer was connected to once: connecting to one again counts as a reconnect. */
    private final Set<InetSocketAddress> connectedBefore = new HashSet<>();
    private final Map<InetSocketAddress, RdmaConnection> open = new HashMap<>();
    private final Map<InetSocketAddress, Long> retryAtNanos = new HashMap<>();
    /** A connect, or a proof on the open connection, under way: at most one per exporter. */
    private final Map<InetSocketAddress, CompletableFuture<ExporterSetup.Setup>> pending = new HashMap<>();
    /** Null when the consumer proves nothing (exporters that check ACLs then refuse it). */
    private final DelegationTokenCredentials credentials;
    /** The token each open connection proved. */
    private final Map<InetSocketAddress, DelegationToken> proven = new HashMap<>();
    /** When a refused proof (or one without a token) is tried again. */
    private final Map<InetSocketAddress, Long> proofRetryAtNanos = new HashMap<>();
    /** Exporters whose answer to a proof did not say they check ACLs (until the connection to them is dropped). */
    private final Set<InetSocketAddress> unchecked = new HashSet<>();
    /** Per exporter, a partition of each topic read from it: the exporter decides on these topics as a token is proven. */
    private final Map<InetSocketAddress, Map<String, TopicPartition>> readingFrom = new HashMap<>();
    /**
     * Exporters connected to before any partition was located there ({@link #connectEarly}); each leaves the set once a
     * partition is, or is closed by {@link #closeUnlocated}.
     */
    private final Set<InetSocketAddress> unlocated = new HashSet<>();
    /** The token's creation or replacement, and letting go of a replaced one, under way (or done, or null). */
    private CompletableFuture<Void> renewal;
    private CompletableFuture<Void> lettingGo;

    ExporterConnections(RdmaTransport transport, Timing timing, DelegationTokenCredentials credentials, Runnable onReconnect) {
        this.setup = new ExporterSetup(transport, credentials);
        this.timing = timing;
        this.reconnectBackoff = timing.reconnectBackoff();
        this.credentials = credentials;
        this.onReconnect = onReconnect;
        if (credentials != null) {
            renewal = setup.renew(); // Created while the consumer finds its partitions' positions and exporters.
        }
    }

    /**
     * The open connection to {@code exporter}, ready to read; null while it is set up, cannot be reached or, for a
     * consumer that proves a token, while it has no token the exporter took or the exporter does not check ACLs
     * ({@link #whyNot}). Starts what is missing (a connect, a proof) without waiting for it.
     */
    RdmaConnection get(InetSocketAddress exporter) {
        return get(exporter, List.of());
    }

    /** As {@link #get(InetSocketAddress)}; {@code reading}: partitions to be read from {@code exporter}. */
    RdmaConnection get(InetSocketAddress exporter, Collection<TopicPartition> reading) {
        long now = System.nanoTime();
        closeIdle(exporter, now);
        takeOver(exporter); // Before the partitions count: an early connect that failed leaves no backoff.
        lastUsedNanos.put(exporter, now);
        Map<String, TopicPartition> topics = readingFrom.computeIfAbsent(exporter, e -> new HashMap<>());
        reading.forEach(tp -> topics.putIfAbsent(tp.topic(), tp));
        if (!reading.isEmpty() && unlocated.remove(exporter)) {
            proofRetryAtNanos.remove(exporter); // A refusal while unlocated: proven again at once, now that it counts.
        }
        RdmaConnection c = open.get(exporter);
        if (c != null && !c.isOpen()) {
            drop(exporter);
            c = null;
        }
        if (c == null) {
            Long retryAt = retryAtNanos.get(exporter);
            if (pending.containsKey(exporter) || retryAt != null && now - retryAt < 0) {
                return null;
            }
            pending.put(exporter, setup.connect(exporter, List.copyOf(topics.values())));
            takeOver(exporter); // A connect that failed, or completed, at once.
            c = open.get(exporter);
            if (c == null) {
                return null;
            }
        }
        keepAlive(exporter, c, now);
        return credentials == null || proven(exporter, c, now, topics.values()) ? c : null;
    }

    /**
     * Starts connecting to (and proving the token to, the proof naming {@code topics}) {@code exporters} before any
     * partition is located there: a new consumer's likely exporters ({@link ExporterLocator#likelyExporters}), set up
     * while its KafkaConsumer fetches metadata and offsets rather than after. One that cannot be reached costs no
     * reconnect backoff, and one that refuses the token does not count against it (it may serve another cluster) and
     * leaves no proof backoff: a partition located there connects, or proves, again at once, as without this.
     */
    void connectEarly(Collection<InetSocketAddress> exporters, Collection<String> topics) {
        for (InetSocketAddress exporter : exporters) {
            if (!open.containsKey(exporter) && !pending.containsKey(exporter) && !retryAtNanos.containsKey(exporter)) {
                unlocated.add(exporter);
                Map<String, TopicPartition> named = readingFrom.computeIfAbsent(exporter, e -> new HashMap<>());
                topics.stream().limit(ExporterAuthentication.MAX_TOPICS_PER_PROOF)
                        .forEach(topic -> named.putIfAbsent(topic, new TopicPartition(topic, 0)));
                get(exporter);
            }
        }
    }

    /** Whether connections made early to exporters no partition was located at are open or being set up. */
    boolean connectedEarly() {
        return !unlocated.isEmpty();
    }

    /**
     * Closes the connections made early to exporters no partition was located at, except those in {@code keep}: all of
     * them once {@code located} (every partition the consumer reads has its exporter), else those unused for
     * {@code connections.max.idle.ms}. A consumer keeps open only the connections it reads on.
     */
    void closeUnlocated(Set<InetSocketAddress> keep, boolean located) {
        long now = System.nanoTime();
        for (InetSocketAddress exporter : List.copyOf(unlocated)) {
            Long used = lastUsedNanos.get(exporter);
            if (keep.contains(exporter)) {
                if (located) {
                    unlocated.remove(exporter); // A partition is read from it: an exporter like any other from now on.
                }
                continue;
            }
            if (!located && used != null && now - used < timing.maxIdle().toNanos()) {
                continue;
            }
            close(exporter);
            lastKeepAliveNanos.remove(exporter);
            retryAtNanos.remove(exporter);
            connectedBefore.remove(exporter); // Connecting when a partition is located there later is no reconnect.
        }
    }

    /** What is under way for {@code exporter}, in words. */
    String settingUp(InetSocketAddress exporter) {
        return (open.containsKey(exporter) ? "proving the delegation token to " : "connecting to ") + exporter;
    }

    /** Whether a connection (a connect, a proof) is being set up now, to any exporter. */
    boolean settingUp() {
        return pending.values().stream().anyMatch(f -> !f.isDone());
    }

    /** What {@code exporter}'s connection waits for (a connect, a proof); null when nothing is under way. */
    CompletableFuture<?> settling(InetSocketAddress exporter) {
        return pending.get(exporter);
    }

    /**
     * Whether {@code c} may be read with the token it proved; starts proving the latest token where it has not (a new
     * token, or a refused proof whose backoff is over), and replacing the token where due.
     */
    private boolean proven(InetSocketAddress exporter, RdmaConnection c, long now, Collection<TopicPartition> reading) {
        if (credentials.due() && (renewal == null || renewal.isDone())) {
            renewal = setup.renew();
        }
        DelegationToken p = proven.get(exporter);
        Long retryAt = proofRetryAtNanos.get(exporter);
        boolean again = retryAt != null ? now - retryAt >= 0 : p != credentials.latest();
        if (again && !pending.containsKey(exporter)) {
            pending.put(exporter, setup.prove(c, List.copyOf(reading)));
        }
        letGoOfUnheld();
        return p != null && credentials.usable(p) && !unchecked.contains(exporter);
    }

    /** Takes over {@code exporter}'s setup step once it is done: a new connection, a proof's verdict, or a failure. */
    private void takeOver(InetSocketAddress exporter) {
        CompletableFuture<ExporterSetup.Setup> f = pending.get(exporter);
        if (f == null || !f.isDone()) {
            return;
        }
        pending.remove(exporter);
        ExporterSetup.Setup s;
        try {
            s = f.join();
        } catch (CompletionException | java.util.concurrent.CancellationException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            LOG.debug(open.containsKey(exporter) ? "proving the delegation token to {} failed: {}"
                    : "cannot reach the rdma4j log exporter at {}: {}", exporter, cause.toString());
            drop(exporter);
            if (unlocated.remove(exporter)) {
                lastUsedNanos.remove(exporter);
                readingFrom.remove(exporter);
            } else {
                retryAtNanos.put(exporter, System.nanoTime() + reconnectBackoff.toNanos());
            }
            return;
        }
        RdmaConnection held = open.get(exporter);
        if (held == null) {
            open.put(exporter, s.connection());
            retryAtNanos.remove(exporter);
            lastKeepAliveNanos.put(exporter, System.nanoTime());
            if (!connectedBefore.add(exporter)) {
                onReconnect.run();
            }
        } else if (held != s.connection()) {
            s.connection().close(); // Not expected: a connect starts only when none is open, and a drop discards it.
            return;
        }
        switch (s.proof()) {
            case NONE -> { }
            case CHECKED -> {
                proven.put(exporter, s.token());
                proofRetryAtNanos.remove(exporter);
                unchecked.remove(exporter);
            }
            case NOT_CHECKING -> {
                proven.put(exporter, s.token());
                proofRetryAtNanos.remove(exporter);
                notChecking(exporter, s.detail());
            }
            case REFUSED -> {
                // A token just created reaches the exporter's broker a moment later: the proof is tried again after the
                // backoff, meanwhile Kafka's fetch serves (or the token proven before, while it lives).
                proofRetryAtNanos.put(exporter, System.nanoTime() + reconnectBackoff.toNanos());
                if (!unlocated.contains(exporter)) {
                    credentials.refused(s.token());
                }
                LOG.info("the rdma4j log exporter at {} refused delegation token {} (trying again in {} ms): {}", exporter,
                        s.token().tokenInfo().tokenId(), reconnectBackoff.toMillis(), s.detail());
            }
            // Logged by the credentials: nothing proves that an exporter checks ACLs for this consumer.
            case NO_TOKEN -> proofRetryAtNanos.put(exporter, System.nanoTime() + reconnectBackoff.toNanos());
        }
    }

    /**
     * Lets go of the token the latest one replaced once no connection holds it (each proved the new one, or is gone):
     * it is expired once every consumer sharing it has.
     */
    private void letGoOfUnheld() {
        DelegationToken old = credentials.retiring();
        if (old != null && (lettingGo == null || lettingGo.isDone()) && !proven.containsValue(old)) {
            lettingGo = setup.letGo(old);
        }
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
        if (unchecked.contains(exporter)) {
            return FallbackReason.ACLS_NOT_CHECKED;
        }
        if (pending.containsKey(exporter)) {
            return FallbackReason.EXPORTER_CONNECTING;
        }
        return credentials != null && open.containsKey(exporter) ? FallbackReason.NOT_AUTHORIZED : FallbackReason.EXPORTER_UNREACHABLE;
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
                close(exporter);
            }
        }
    }

    /** Closes the connection to {@code exporter} and forgets what this consumer read from it and when. */
    private void close(InetSocketAddress exporter) {
        drop(exporter);
        unlocated.remove(exporter);
        lastUsedNanos.remove(exporter);
        readingFrom.remove(exporter);
    }

    /**
     * Closes the connection to {@code exporter}, failing what is still in flight on it, and discards its setup under
     * way; whether there was a connection.
     */
    boolean drop(InetSocketAddress exporter) {
        RdmaConnection c = open.remove(exporter);
        proven.remove(exporter);
        unchecked.remove(exporter);
        proofRetryAtNanos.remove(exporter);
        CompletableFuture<ExporterSetup.Setup> f = pending.remove(exporter);
        if (f != null) {
            f.thenAccept(s -> s.connection().close()); // A connect that completes later is closed, not leaked.
        }
        if (c != null) {
            c.close();
        }
        return c != null;
    }

    /** Closes every connection and discards the setups under way, without waiting for them; then lets go of the token. */
    @Override
    public void close() {
        Set<InetSocketAddress> all = new HashSet<>(open.keySet());
        all.addAll(pending.keySet());
        all.forEach(this::drop);
        setup.close();
    }
}
