package io.rdma4j.kafka;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.errors.DelegationTokenNotFoundException;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The delegation token that every consumer in this JVM with the same cluster and security settings (the same
 * principal) proves to log exporters that check Kafka ACLs. One token per principal and process, not per consumer: the
 * cluster's controller writes each token to the metadata log and every exporter logs in as each token it is shown, so a
 * process with hundreds of consumers costs what one costs; and a new consumer proves the token at once, reading by RDMA
 * as soon as a {@code KafkaConsumer} reads, where creating a token of its own and having each exporter decide on it takes
 * hundreds of ms. The token's owner is the consumers' principal, whichever consumer created it.
 *
 * <p>Created by the first consumer's setup thread, replaced at four fifths of its life, and expired once the last
 * consumer has closed and no new one came for {@code rdma.exporter.token.linger.ms} (0: at the last close). A replaced
 * token is expired once every consumer that held it reports that none of its connections still does
 * ({@link #released}). A token left when the JVM exits lapses at the end of its lifetime.
 *
 * <p>Threads: {@link #current} and the expiries call the cluster and run on the consumers' setup threads or the expiry
 * thread, one at a time; polling threads read only volatile fields ({@link #latest}, {@link #retiring}, {@link #due},
 * {@link #usable}, {@link #refused}). Locks: the monitor of an instance may be held while {@link #IN_USE}'s is taken,
 * never the other way round.
 */
final class SharedDelegationToken {

    private static final Logger LOG = LoggerFactory.getLogger(SharedDelegationToken.class);
    private static final long ANSWER_WAIT_MS = 10_000;
    /** How long a new token may take to reach every broker before a refusal counts against it. */
    private static final long PROPAGATION_MS = 30_000;
    private static final long PROPAGATION_WAIT_MS = 5_000;
    /** Between asks whether a broker knows a new token: it usually does after one or two metadata-log fetches. */
    private static final long PROPAGATION_POLL_MS = 10;
    /** The tokens in use or lingering, per principal's settings; also the lock of every instance's lease fields. */
    private static final Map<Map<String, Object>, SharedDelegationToken> IN_USE = new HashMap<>();
    /** Expires tokens whose linger is over; its thread is there only while an expiry waits. */
    private static final ScheduledThreadPoolExecutor EXPIRY = expiryThread();

    private final Map<String, Object> settings;
    private final Map<String, Object> adminConfigs;
    private final Duration lifetime;
    private final Duration retryBackoff;

    // Guarded by IN_USE.
    private final Set<DelegationTokenCredentials> leases = new HashSet<>();
    private ScheduledFuture<?> pendingExpiry;
    private boolean ended;

    // Guarded by this; the volatile ones are read without it.
    private Admin admin;
    private volatile DelegationToken token;
    /** The token {@link #token} replaced, until every consumer that held it released it. */
    private volatile DelegationToken retiring;
    private final Set<DelegationTokenCredentials> holdingRetiring = new HashSet<>();
    private volatile long replaceAtMillis;
    private volatile long retryAtNanos = System.nanoTime();
    private boolean warned;

    private SharedDelegationToken(Map<String, Object> settings, Map<String, Object> adminConfigs, Duration lifetime, Duration retryBackoff) {
        this.settings = settings;
        this.adminConfigs = adminConfigs;
        this.lifetime = lifetime;
        this.retryBackoff = retryBackoff;
    }

    /**
     * The token shared by consumers with {@code kafkaConfigs}' cluster and security settings and {@code lifetime},
     * now leased to {@code lease} as well; a lingering expiry of it is called off.
     */
    static SharedDelegationToken lease(DelegationTokenCredentials lease, Map<String, ?> kafkaConfigs, Duration lifetime, Duration retryBackoff) {
        Map<String, Object> admin = adminConfigs(kafkaConfigs);
        Map<String, Object> settings = principalSettings(admin);
        settings.put("rdma4j.token.lifetime.ms", lifetime.toMillis());
        synchronized (IN_USE) {
            SharedDelegationToken shared = IN_USE.computeIfAbsent(Map.copyOf(settings),
                    s -> new SharedDelegationToken(s, admin, lifetime, retryBackoff));
            shared.leases.add(lease);
            if (shared.pendingExpiry != null) {
                shared.pendingExpiry.cancel(false);
                shared.pendingExpiry = null;
            }
            return shared;
        }
    }

    /** The consumer's settings an Admin client knows, with a client id of its own. */
    static Map<String, Object> adminConfigs(Map<String, ?> kafkaConfigs) {
        Map<String, Object> admin = new HashMap<>();
        kafkaConfigs.forEach((k, v) -> {
            if (AdminClientConfig.configNames().contains(k) && v != null) {
                admin.put(k, v);
            }
        });
        admin.put(AdminClientConfig.CLIENT_ID_CONFIG, Objects.toString(kafkaConfigs.get(ConsumerConfig.CLIENT_ID_CONFIG), "consumer") + "-rdma4j-token");
        return Map.copyOf(admin);
    }

    /**
     * What decides whose token it is and on which cluster: the bootstrap servers and every security setting (SASL,
     * TLS, the security protocol). Consumers that differ only in others (group, client id, timeouts) share a token.
     */
    static Map<String, Object> principalSettings(Map<String, Object> adminConfigs) {
        Map<String, Object> out = new HashMap<>();
        adminConfigs.forEach((k, v) -> {
            if (k.equals(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG) || k.equals(AdminClientConfig.BOOTSTRAP_CONTROLLERS_CONFIG)
                    || k.startsWith("security.") || k.startsWith("sasl.") || k.startsWith("ssl.")) {
                out.put(k, v instanceof java.util.List<?> list ? java.util.List.copyOf(list) : v);
            }
        });
        return out;
    }

    /** The token to prove now, created or replaced as needed; null while none can be created (logged). Setup threads. */
    synchronized DelegationToken current() {
        synchronized (IN_USE) {
            if (ended) {
                return null;
            }
        }
        if (token != null && System.currentTimeMillis() < replaceAtMillis) {
            return token;
        }
        if (System.nanoTime() - retryAtNanos < 0) {
            return token != null && token.tokenInfo().expiryTimestamp() > System.currentTimeMillis() ? token : null;
        }
        try {
            if (admin == null) {
                admin = Admin.create(adminConfigs);
            }
            DelegationToken created = admin.createDelegationToken(new CreateDelegationTokenOptions().maxLifetimeMs(lifetime.toMillis()))
                    .delegationToken().get(ANSWER_WAIT_MS, TimeUnit.MILLISECONDS);
            awaitKnown(created);
            DelegationToken previous = token;
            if (retiring != null && previous != null) {
                expire(retiring); // Replaced twice while a connection held it: that one proves the newest next.
            }
            if (previous != null) {
                retiring = previous;
                holdingRetiring.clear();
                synchronized (IN_USE) {
                    holdingRetiring.addAll(leases);
                }
            }
            token = created;
            long issued = created.tokenInfo().issueTimestamp();
            replaceAtMillis = issued + (created.tokenInfo().expiryTimestamp() - issued) * 4 / 5;
            warned = false;
            LOG.debug("created delegation token {} for the rdma4j log exporters", created.tokenInfo().tokenId());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            retryAtNanos = System.nanoTime() + retryBackoff.toNanos();
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            if (!warned) {
                warned = true;
                LOG.warn("cannot create a delegation token to prove to the rdma4j log exporters ({}); exporters that check "
                        + "Kafka ACLs refuse this consumer, which fetches through Kafka meanwhile. Delegation tokens need "
                        + "delegation.token.secret.key on the cluster and a SASL or TLS-authenticated consumer", cause.toString());
            }
        }
        return token;
    }

    /** The token last created, or null; what connections should have proven. */
    DelegationToken latest() {
        return token;
    }

    /** The token the latest one replaced, until it is expired; null when none. */
    DelegationToken retiring() {
        return retiring;
    }

    /** Whether {@link #current} would create a token now: none yet, or the current one due for replacement. */
    boolean due() {
        return (token == null || System.currentTimeMillis() >= replaceAtMillis) && System.nanoTime() - retryAtNanos >= 0;
    }

    /** Whether a connection that proved {@code proven} may read with it: it is the latest or retiring token, and alive. */
    boolean usable(DelegationToken proven) {
        return (proven == token || proven == retiring) && proven.tokenInfo().expiryTimestamp() > System.currentTimeMillis();
    }

    /**
     * An exporter refused {@code refused}. Brokers learn a new token within a second or so; one refused after that
     * (expired or deleted by someone) is replaced at the next {@link #current()}.
     */
    void refused(DelegationToken refused) {
        if (refused == token && System.currentTimeMillis() - refused.tokenInfo().issueTimestamp() > PROPAGATION_MS) {
            replaceAtMillis = 0;
        }
    }

    /** No connection of {@code lease} holds {@code old} any more: expired once that is true of every lease that held it. */
    synchronized void released(DelegationTokenCredentials lease, DelegationToken old) {
        if (old != null && old == retiring && holdingRetiring.remove(lease) && holdingRetiring.isEmpty()) {
            retiring = null;
            expire(old);
        }
    }

    /**
     * {@code lease}'s consumer closed. The last one leaves the token for {@code linger}, for a consumer that comes
     * meanwhile, then expires it; with a linger of 0 it expires it now, on the calling thread.
     */
    void release(DelegationTokenCredentials lease, Duration linger) {
        boolean last;
        synchronized (IN_USE) {
            last = leases.remove(lease) && leases.isEmpty() && !ended;
            if (last && !linger.isZero()) {
                pendingExpiry = EXPIRY.schedule(this::endIfUnused, linger.toMillis(), TimeUnit.MILLISECONDS);
            }
        }
        released(lease, retiring);
        if (last && linger.isZero()) {
            endIfUnused();
        }
    }

    /** Expires the tokens and closes the Admin client, unless a consumer leased the token again meanwhile. */
    private void endIfUnused() {
        synchronized (IN_USE) {
            if (!leases.isEmpty() || ended) {
                return;
            }
            ended = true;
            IN_USE.remove(settings, this);
        }
        synchronized (this) {
            if (admin == null) {
                return;
            }
            DelegationToken t = token;
            try {
                if (retiring != null) {
                    expire(retiring);
                }
                if (t != null) {
                    expireAndWait(t);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (Exception e) {
                LOG.debug("delegation token {} not expired after its last consumer closed (it lapses by itself): {}",
                        t.tokenInfo().tokenId(), e.toString());
            } finally {
                token = null;
                retiring = null;
                admin.close(Duration.ofSeconds(5));
            }
        }
    }

    /**
     * Waits (at most {@link #PROPAGATION_WAIT_MS}) until a broker answers with the new token: brokers learn it from the
     * metadata log a moment after it is created, and an exporter asked before refuses the proof.
     */
    private void awaitKnown(DelegationToken created) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PROPAGATION_WAIT_MS);
        String id = created.tokenInfo().tokenId();
        while (admin.describeDelegationToken().delegationTokens().get(ANSWER_WAIT_MS, TimeUnit.MILLISECONDS).stream()
                .noneMatch(t -> t.tokenInfo().tokenId().equals(id)) && System.nanoTime() - deadline < 0) {
            Thread.sleep(PROPAGATION_POLL_MS);
        }
    }

    /**
     * Expires {@code t}, waiting for the answer. The broker asked may not have learnt a token created a moment ago (it
     * answers that it knows no such token): it is asked again until {@link #PROPAGATION_WAIT_MS} is over.
     */
    private void expireAndWait(DelegationToken t) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PROPAGATION_WAIT_MS);
        while (true) {
            try {
                admin.expireDelegationToken(t.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp()
                        .get(ANSWER_WAIT_MS, TimeUnit.MILLISECONDS);
                return;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof DelegationTokenNotFoundException) || System.nanoTime() - deadline >= 0) {
                    throw e;
                }
                Thread.sleep(PROPAGATION_POLL_MS);
            }
        }
    }

    /** Expires {@code t} now, without waiting for the answer (it lapses by itself otherwise). */
    private void expire(DelegationToken t) {
        admin.expireDelegationToken(t.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp()
                .whenComplete((at, e) -> {
                    if (e != null) {
                        LOG.debug("delegation token {} not expired (it lapses by itself): {}", t.tokenInfo().tokenId(), e.toString());
                    }
                });
    }

    private static ScheduledThreadPoolExecutor expiryThread() {
        ScheduledThreadPoolExecutor e = new ScheduledThreadPoolExecutor(1,
                Thread.ofPlatform().daemon().name("rdma4j-kafka-token-expiry").factory());
        e.setKeepAliveTime(5, TimeUnit.SECONDS);
        e.allowCoreThreadTimeOut(true);
        e.setRemoveOnCancelPolicy(true);
        return e;
    }
}
