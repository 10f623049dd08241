package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RequestContext;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.kafka.protocol.ExporterAuthentication;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Lets a consumer connection read a topic only when the cluster's own authorizer gives the consumer's Kafka principal
 * READ on it ({@code rdma.exporter.acls=true}).
 *
 * <p>Who the consumer is: it proves, per connection, that it holds a delegation token
 * ({@link ExporterAuthentication}); the token's owner is its principal. The exporter learns the token's HMAC from the
 * cluster with its own Admin client ({@code describeDelegationToken}, which needs DESCRIBE_TOKENS on the owners or a
 * super user), so the credential never crosses the rdma4j connection. What it may read: the exporter authenticates to
 * the cluster with that token (SCRAM, {@code tokenauth=true}) and describes the topic with its authorized operations,
 * so the broker's authorizer, with every ACL, prefix, deny and super user it knows, decides for the token's owner.
 * Decisions are kept per principal and topic for {@code rdma.exporter.acl.cache.ms}: a READ granted or revoked counts
 * from the next directory request after that, and a connection's token is looked up again as often, so one expired or
 * deleted stops counting then too.
 */
final class TopicReadAuthorizer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(TopicReadAuthorizer.class);
    /**
     * A token client asking nothing for this long is closed; decisions outlive it. Kept open, it would reconnect by
     * itself whenever a broker restarts, with a token that may be gone by then, and each failed login is an ERROR and
     * a WARN line of Kafka's client, again and again until it is closed.
     */
    private static final long CLIENT_IDLE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    /** Tokens with a client open at once: beyond it a new token is refused, so a flood of tokens costs bounded threads. */
    static final int MAX_TOKEN_CLIENTS = 256;
    /**
     * The cluster's delegation tokens are described at most this often, whoever asks how often: a proof of a token no
     * listing of the last {@link #LISTING_TRUSTED} shows live, and each undecided directory request, needs the tokens
     * as they are after it arrived, and a peer sends those at its pace.
     */
    static final Duration TOKEN_LIST_INTERVAL = Duration.ofMillis(100);
    /**
     * How long a proof or check waits for a token the cluster's answer does not list yet: brokers learn a new token from
     * the metadata log a moment apart, so the broker asked may not know a token that the consumer's broker knows.
     */
    static final Duration TOKEN_ARRIVAL_WAIT = Duration.ofSeconds(2);
    /**
     * A listing this old is trusted. A token it lists live is taken for a proof without asking the cluster again, and a
     * token listed this recently for its proof is not looked up again before a decision on it. So a token deleted
     * within that second may be proven once more, and reads until it is looked up again once its listing is
     * {@code rdma.exporter.acl.cache.ms} old, as any connection's token is: the bound on how long a deleted token reads
     * stays that cache period from its listing. A new consumer among others starting then gets its proof's answer and
     * its first READ without the exporter's round trip to the cluster (up to {@link #TOKEN_LIST_INTERVAL} more when
     * another lookup just went out).
     */
    static final Duration LISTING_TRUSTED = Duration.ofSeconds(1);
    /** Between tries of a token client whose login the cluster did not take (the broker asked does not know it yet). */
    private static final long LOGIN_RETRY_MILLIS = 250;
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Admin admin;
    private final Map<String, Object> tokenClientBase;
    private final String mechanism;
    private final long decisionNanos;
    private final Map<RdmaConnection, Session> sessions = new ConcurrentHashMap<>();
    private final Map<String, TokenClient> clients = new ConcurrentHashMap<>();
    /**
     * Per principal (a token's owner), the decisions per topic: what the cluster's authorizer answers depends on the
     * principal, not on which of its tokens logged in, so a principal's new token (each process of a Spark application,
     * each consumer with a token of its own) finds its topics decided.
     */
    private final Map<String, Map<String, Decision>> decisions = new ConcurrentHashMap<>();
    private final AtomicLong authenticated = new AtomicLong();
    private final AtomicLong rejectedProofs = new AtomicLong();
    private final AtomicLong refusals = new AtomicLong();
    private final AtomicLong decisionsMade = new AtomicLong();
    private final CoalescingFetcher<List<DelegationToken>> tokenLists;
    private final LogThrottle refusedProofLog = new LogThrottle(Duration.ofSeconds(1));

    /**
     * What a connection proved: the nonce it was last given, then the token it holds (set by each proof taken, as its
     * lookup completes; replaced by the same token listed again, or cleared once it is gone, only where no proof set
     * another meanwhile).
     */
    private static final class Session {
        volatile byte[] nonce;
        final AtomicReference<Token> token = new AtomicReference<>();
    }

    /** A token as listed by the cluster in a list fetched after {@code listedAfterNanos}. */
    private record Token(String id, byte[] hmac, long expiresAtMillis, String owner, long listedAfterNanos) {
    }

    private record Decision(String denial, long validUntilNanos) {
    }

    /** The cluster as one token's owner sees it. */
    private static final class TokenClient {
        final Admin admin;
        final java.util.concurrent.atomic.AtomicInteger asking = new java.util.concurrent.atomic.AtomicInteger();
        volatile long lastUsedNanos = System.nanoTime();

        TokenClient(Admin admin) {
            this.admin = admin;
        }
    }

    /**
     * @param admin           the exporter's own Admin client: describes delegation tokens
     * @param adminProperties its settings (bootstrap, security protocol, TLS, ...): token clients use them with the
     *                        token's SCRAM login in place of the exporter's
     */
    TopicReadAuthorizer(Admin admin, Map<String, Object> adminProperties, String mechanism, Duration decisionTtl) {
        this.admin = admin;
        Map<String, Object> base = new HashMap<>(adminProperties);
        base.keySet().removeIf(k -> k.startsWith("sasl.") && !k.startsWith("sasl.kerberos.") || k.equals(AdminClientConfig.CLIENT_ID_CONFIG));
        base.put(AdminClientConfig.CLIENT_ID_CONFIG, "rdma4j-log-exporter-acl");
        this.tokenClientBase = Map.copyOf(base);
        this.mechanism = mechanism;
        this.decisionNanos = decisionTtl.toNanos();
        this.tokenLists = new CoalescingFetcher<>(() -> admin.describeDelegationToken().delegationTokens().toCompletionStage(),
                TOKEN_LIST_INTERVAL);
    }

    /** Connections that proved a token so far. */
    long authenticated() {
        return authenticated.get();
    }

    /** Proofs that named no live token or did not match its HMAC. */
    long rejectedProofs() {
        return rejectedProofs.get();
    }

    /** Times the cluster's delegation tokens were described (at most one per {@link #TOKEN_LIST_INTERVAL}). */
    long tokenListFetches() {
        return tokenLists.fetches();
    }

    /** Decisions made by asking the cluster, each then kept for its principal and topic; a login not taken yet is none. */
    long decisionsMade() {
        return decisionsMade.get();
    }

    /**
     * Directory and aborted-transactions requests refused for want of READ (or of a proven token), and topics a proof
     * named that its token's owner may not READ.
     */
    long refusals() {
        return refusals.get();
    }

    /** The Kafka principal whose delegation token {@code connection} proved, or null. */
    String principal(RdmaConnection connection) {
        Session session = sessions.get(connection);
        Token token = session == null ? null : session.token.get();
        return token == null ? null : token.owner();
    }

    /** Answers a {@code KAFKA_AUTHENTICATE} request. */
    CompletionStage<ByteBuffer> authenticate(ByteBuffer body, RequestContext context) {
        ExporterAuthentication.Request request = ExporterAuthentication.Request.fromBytes(body);
        Session session = sessions.computeIfAbsent(context.connection(), c -> new Session());
        if (request instanceof ExporterAuthentication.Challenge) {
            byte[] nonce = new byte[ExporterAuthentication.NONCE_BYTES];
            RANDOM.nextBytes(nonce);
            session.nonce = nonce;
            return CompletableFuture.completedFuture(ByteBuffer.wrap(nonce.clone()));
        }
        ExporterAuthentication.Proof proof = (ExporterAuthentication.Proof) request;
        byte[] nonce = session.nonce;
        session.nonce = null; // One proof per challenge: a failed guess costs the prover a new round trip.
        if (nonce == null) {
            rejectedProofs.incrementAndGet();
            throw new RequestRefusedException("ask for a challenge before sending a proof");
        }
        return lookUpForProof(proof.tokenId()).thenApply(token -> {
            if (token == null || !MessageDigest.isEqual(ExporterAuthentication.proof(token.hmac(), nonce, token.id()), proof.proof())) {
                rejectedProofs.incrementAndGet();
                logRefusedProof(context, token == null ? "no live token " + proof.tokenId() : "the proof does not match token " + token.id());
                throw new RequestRefusedException("the proof names no live delegation token of this cluster, or does not match it; "
                        + "the consumer creates a new token and tries again");
            }
            session.token.set(token);
            authenticated.incrementAndGet();
            LOG.debug("{} proved delegation token {} of {}", context.peer().address(), token.id(), token.owner());
            return token;
        }).thenCompose(token -> decideAhead(context, proof.topics()))
                .thenApply(decided -> ByteBuffer.wrap(ExporterAuthentication.Verdict.ACLS_CHECKED.toBytes()));
    }

    /**
     * Decides on the topics a proof names, as a directory request on each would, before the proof is answered: the
     * consumer's first directory requests then find their decisions made. One that cannot be made now (the cluster
     * not answering) is left to the directory request, which reports it.
     */
    private CompletableFuture<Void> decideAhead(RequestContext context, List<String> topics) {
        return CompletableFuture.allOf(topics.stream().distinct().map(topic -> {
            try {
                return denial(context, topic).toCompletableFuture().handle((denial, error) -> null);
            } catch (RuntimeException notNow) {
                return CompletableFuture.completedFuture(null);
            }
        }).toArray(CompletableFuture[]::new));
    }

    /** At INFO once a second at most, so that a peer sending forged proofs cannot flood the log; else at DEBUG. */
    private void logRefusedProof(RequestContext context, String why) {
        long quiet = refusedProofLog.loudOrQuiet();
        if (quiet < 0) {
            LOG.debug("refused a delegation token proof from {}: {}", context.peer().address(), why);
        } else {
            LOG.info("refused a delegation token proof from {}: {}{}", context.peer().address(), why, quiet == 0 ? ""
                    : " (" + quiet + " more refused since the last such line, logged at DEBUG)");
        }
    }

    /**
     * Token {@code id} as the cluster lists it after this call, or null when it is expired, or not listed by the
     * deadline. A token not listed is asked again (the lookups shared with every other caller, at most one per
     * {@link #TOKEN_LIST_INTERVAL}), as the broker asked may learn it a moment after the consumer's broker did.
     */
    private CompletionStage<Token> lookUp(String id, long deadlineNanos) {
        long asked = System.nanoTime();
        return tokenLists.fetchedAfterNow().thenCompose(tokens -> {
            DelegationToken t = listed(tokens, id);
            if (t != null) {
                return CompletableFuture.completedFuture(live(t, asked));
            }
            return System.nanoTime() - deadlineNanos >= 0 ? CompletableFuture.completedFuture(null) : lookUp(id, deadlineNanos);
        });
    }

    /**
     * Token {@code id} for a proof: from a listing at most {@link #LISTING_TRUSTED} old where that lists it live, else
     * as {@link #lookUp} finds it.
     */
    private CompletionStage<Token> lookUpForProof(String id) {
        CoalescingFetcher.Recent<List<DelegationToken>> recent = tokenLists.recent(LISTING_TRUSTED);
        DelegationToken t = recent == null ? null : listed(recent.value(), id);
        Token token = t == null ? null : live(t, recent.startedNanos());
        return token != null ? CompletableFuture.completedFuture(token) : lookUp(id, System.nanoTime() + TOKEN_ARRIVAL_WAIT.toNanos());
    }

    private static DelegationToken listed(List<DelegationToken> tokens, String id) {
        for (DelegationToken t : tokens) {
            if (t.tokenInfo().tokenId().equals(id)) {
                return t;
            }
        }
        return null;
    }

    /** {@code t} as listed after {@code listedAfterNanos}, or null once it expired. */
    private static Token live(DelegationToken t, long listedAfterNanos) {
        long expires = t.tokenInfo().expiryTimestamp();
        return expires > System.currentTimeMillis()
                ? new Token(t.tokenInfo().tokenId(), t.hmac(), expires, t.tokenInfo().owner().toString(), listedAfterNanos) : null;
    }

    /**
     * Completes with null when the connection may read {@code topic}, else with the reason it may not; fails with
     * {@link RequestRefusedException} when the cluster cannot be asked now (nothing is decided then).
     */
    CompletionStage<String> denial(RequestContext context, String topic) {
        Session session = sessions.get(context.connection());
        Token token = session == null ? null : session.token.get();
        if (token == null) {
            return denied("this exporter serves only consumers that prove a delegation token: set "
                    + "rdma.exporter.authentication=delegation-token on the consumer");
        }
        if (token.expiresAtMillis() <= System.currentTimeMillis()) {
            return denied("delegation token " + token.id() + " expired; the consumer creates a new one");
        }
        long now = System.nanoTime();
        Decision known = known(token.owner(), topic, now);
        // The connection's token is looked up again once it was last listed a decision's lifetime ago (the decision
        // itself may be younger: another token of the principal renewed it), and before a new decision unless just
        // listed: one expired or deleted since the proof must stop counting, and a client already connected with it
        // would not notice (the broker checks a token when a connection authenticates).
        long listedAgo = now - token.listedAfterNanos();
        if (known != null && listedAgo < decisionNanos) {
            return answer(known);
        }
        long deadline = now + TOKEN_ARRIVAL_WAIT.toNanos();
        if (known == null && listedAgo < LISTING_TRUSTED.toNanos()) {
            return ask(token, topic, deadline);
        }
        return lookUp(token.id(), deadline).thenCompose(live -> {
            if (live == null) {
                session.token.compareAndSet(token, null);
                closeClient(token.id());
                return denied("delegation token " + token.id() + " expired or was deleted; the consumer creates a new one");
            }
            session.token.compareAndSet(token, live);
            Decision still = known(token.owner(), topic, System.nanoTime());
            return still != null ? answer(still) : ask(live, topic, deadline);
        });
    }

    /** {@code owner}'s decision on {@code topic}, or null when none is kept or it lapsed. */
    private Decision known(String owner, String topic, long now) {
        Map<String, Decision> decided = decisions.get(owner);
        Decision known = decided == null ? null : decided.get(topic);
        return known != null && known.validUntilNanos() - now > 0 ? known : null;
    }

    private CompletionStage<String> answer(Decision decision) {
        return decision.denial() == null ? CompletableFuture.completedFuture(null) : denied(decision.denial());
    }

    /**
     * Describes {@code topic} as the token's owner. A login the cluster does not take yet (the broker the client reached
     * has not learnt the token) is tried again with a new client until {@code deadlineNanos}, so a consumer with READ is
     * not sent to Kafka's fetch for a token that is merely on its way.
     */
    private CompletionStage<String> ask(Token token, String topic, long deadlineNanos) {
        TokenClient client = client(token);
        if (client == null) {
            return denied("this exporter has " + MAX_TOKEN_CLIENTS + " delegation tokens in use; try again later");
        }
        return client.admin.describeTopics(List.of(topic), new DescribeTopicsOptions().includeAuthorizedOperations(true))
                .topicNameValues().get(topic).toCompletionStage().handle((described, error) -> {
                    client.lastUsedNanos = System.nanoTime();
                    client.asking.decrementAndGet();
                    Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
                    if (cause instanceof AuthenticationException && System.nanoTime() - deadlineNanos < 0) {
                        closeClient(token.id());
                        return null;
                    }
                    return decide(token, topic, described, error);
                }).thenCompose(decided -> decided != null ? CompletableFuture.completedFuture(decided.denial())
                        : CompletableFuture.runAsync(() -> { }, CompletableFuture.delayedExecutor(LOGIN_RETRY_MILLIS,
                        TimeUnit.MILLISECONDS)).thenCompose(retry -> ask(token, topic, deadlineNanos)));
    }

    /** A decision, or one not kept ({@link Decision#validUntilNanos} 0) such as a login the cluster did not take. */
    private Decision decide(Token token, String topic, TopicDescription described, Throwable error) {
        String mayNotRead = token.owner() + " may not READ topic " + topic;
        String denial;
        if (error == null) {
            Set<AclOperation> ops = described.authorizedOperations();
            denial = ops != null && (ops.contains(AclOperation.READ) || ops.contains(AclOperation.ALL)) ? null : mayNotRead;
        } else {
            Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
            if (cause instanceof TopicAuthorizationException || cause instanceof UnknownTopicOrPartitionException) {
                denial = mayNotRead;
            } else if (cause instanceof AuthenticationException) {
                // Not kept: a broker learns a new token a moment after it is created, so the next request asks again.
                closeClient(token.id());
                refusals.incrementAndGet();
                return new Decision("the cluster did not take delegation token " + token.id() + " within "
                        + TOKEN_ARRIVAL_WAIT.toMillis() + " ms: " + cause.getMessage(), 0);
            } else {
                throw new RequestRefusedException("cannot ask the cluster whether " + token.owner() + " may read "
                        + topic + " (" + cause.getClass().getSimpleName() + "); fetch through Kafka meanwhile");
            }
        }
        Decision decision = new Decision(denial, System.nanoTime() + decisionNanos);
        decisions.computeIfAbsent(token.owner(), owner -> new ConcurrentHashMap<>()).put(topic, decision);
        decisionsMade.incrementAndGet();
        if (denial != null) {
            refusals.incrementAndGet();
        }
        return decision;
    }

    private void closeClient(String tokenId) {
        TokenClient c = clients.remove(tokenId);
        if (c != null) {
            c.admin.close(Duration.ZERO);
        }
    }

    private CompletionStage<String> denied(String why) {
        refusals.incrementAndGet();
        return CompletableFuture.completedFuture(why);
    }

    /** The token's client, counted as asking (so not closed as idle) until the caller's answer comes; null when too many. */
    private TokenClient client(Token token) {
        if (!clients.containsKey(token.id()) && clients.size() >= MAX_TOKEN_CLIENTS) {
            return null;
        }
        return clients.compute(token.id(), (id, existing) -> {
            TokenClient c = existing;
            if (c == null) {
                Map<String, Object> props = new HashMap<>(tokenClientBase);
                props.put(SaslConfigs.SASL_MECHANISM, mechanism);
                props.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                        + id + "\" password=\"" + java.util.Base64.getEncoder().encodeToString(token.hmac()) + "\" tokenauth=\"true\";");
                c = new TokenClient(Admin.create(props));
            }
            c.asking.incrementAndGet();
            return c;
        });
    }

    /**
     * Forgets closed connections and lapsed decisions, and closes token clients that asked nothing for
     * {@link #CLIENT_IDLE_NANOS}; the exporter's refresher calls it.
     */
    void sweep() {
        sessions.keySet().removeIf(c -> !c.isOpen());
        long now = System.nanoTime();
        for (String id : List.copyOf(clients.keySet())) {
            clients.computeIfPresent(id, (key, c) -> {
                if (c.asking.get() == 0 && now - c.lastUsedNanos > CLIENT_IDLE_NANOS) {
                    c.admin.close(Duration.ZERO);
                    return null;
                }
                return c;
            });
        }
        decisions.values().forEach(topics -> topics.values().removeIf(d -> d.validUntilNanos() - now <= 0));
        decisions.values().removeIf(Map::isEmpty);
    }

    @Override
    public void close() {
        sessions.clear();
        clients.values().forEach(c -> c.admin.close(Duration.ofSeconds(1)));
        clients.clear();
        decisions.clear();
    }
}
