package io.rdma4j.kafka;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateDelegationTokenOptions;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The delegation token a consumer proves to log exporters that check Kafka ACLs
 * ({@code rdma.exporter.authentication=delegation-token}). It is created with the consumer's own Kafka client
 * settings, so its owner is the consumer's principal; replaced when four fifths of its life are over, and expired when
 * the consumer closes. A replaced token is expired once no connection still holds it ({@link #expireRetiring}), so
 * connections keep reading while they prove the new one.
 *
 * <p>Threads: {@link #current}, {@link #expireRetiring} and {@link #close} call the cluster and run on the consumer's
 * setup thread only ({@link ExporterSetup}); the polling thread reads {@link #latest}, {@link #retiring}, {@link #due}
 * and {@link #usable}, which touch only volatile fields, and calls {@link #refused} and {@link #closing}.
 */
final class DelegationTokenCredentials implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(DelegationTokenCredentials.class);
    private static final long ANSWER_WAIT_MS = 10_000;
    /** How long a new token may take to reach every broker before a refusal counts against it. */
    private static final long PROPAGATION_MS = 30_000;
    private static final long PROPAGATION_WAIT_MS = 5_000;

    private final Map<String, Object> adminConfigs;
    private final Duration lifetime;
    private final Duration retryBackoff;
    private Admin admin;
    private volatile DelegationToken token;
    /** The token {@link #token} replaced, until {@link #expireRetiring} expires it. */
    private volatile DelegationToken retiring;
    private volatile long replaceAtMillis;
    private volatile long retryAtNanos = System.nanoTime();
    private volatile boolean closed;
    private boolean warned;

    /** @param kafkaConfigs the consumer's Kafka settings; those an Admin client knows are used */
    DelegationTokenCredentials(Map<String, ?> kafkaConfigs, Duration lifetime, Duration retryBackoff) {
        Map<String, Object> admin = new HashMap<>();
        kafkaConfigs.forEach((k, v) -> {
            if (AdminClientConfig.configNames().contains(k) && v != null) {
                admin.put(k, v);
            }
        });
        admin.put(AdminClientConfig.CLIENT_ID_CONFIG, java.util.Objects.toString(kafkaConfigs.get(ConsumerConfig.CLIENT_ID_CONFIG), "consumer") + "-rdma4j-token");
        this.adminConfigs = Map.copyOf(admin);
        this.lifetime = lifetime;
        this.retryBackoff = retryBackoff;
    }

    /** The consumer closes: nothing more is created, and a token being created is expired by {@link #close}, which follows. */
    void closing() {
        closed = true;
    }

    /** The token to prove now, created or replaced as needed; null while none can be created (logged). Setup thread only. */
    DelegationToken current() {
        if (closed) {
            return null;
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
            DelegationToken older = retiring;
            if (previous != null) {
                retiring = previous;
            }
            token = created;
            long issued = created.tokenInfo().issueTimestamp();
            replaceAtMillis = issued + (created.tokenInfo().expiryTimestamp() - issued) * 4 / 5;
            warned = false;
            if (older != null && previous != null) {
                expire(older); // Replaced twice while a connection held it: that one proves the newest next.
            }
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

    /** Expires {@code old} if it is still the retiring token (no connection holds it any more). Setup thread only. */
    void expireRetiring(DelegationToken old) {
        if (old != null && old == retiring) {
            retiring = null;
            expire(old);
        }
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

    /**
     * Waits (at most {@link #PROPAGATION_WAIT_MS}) until a broker answers with the new token: brokers learn it from the
     * metadata log a few hundred ms after it is created, and an exporter asked before refuses the proof.
     */
    private void awaitKnown(DelegationToken created) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PROPAGATION_WAIT_MS);
        String id = created.tokenInfo().tokenId();
        while (!closed && admin.describeDelegationToken().delegationTokens().get(ANSWER_WAIT_MS, TimeUnit.MILLISECONDS).stream()
                .noneMatch(t -> t.tokenInfo().tokenId().equals(id)) && System.nanoTime() - deadline < 0) {
            Thread.sleep(50);
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

    /** Expires the tokens and closes the Admin client. Setup thread only, after {@link #closing}. */
    @Override
    public void close() {
        closed = true;
        if (admin == null) {
            return;
        }
        DelegationToken t = token;
        try {
            if (retiring != null) {
                expire(retiring);
            }
            if (t != null) {
                admin.expireDelegationToken(t.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp()
                        .get(ANSWER_WAIT_MS, TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            LOG.debug("delegation token {} not expired at close (it lapses by itself): {}", t.tokenInfo().tokenId(), e.toString());
        } finally {
            admin.close(Duration.ofSeconds(5));
        }
    }
}
