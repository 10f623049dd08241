package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RequestContext;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.kafka.protocol.ExporterAuthentication;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Whether the exporter checks Kafka ACLs ({@link AclMode}), and that decision applied to each request. In
 * {@link AclMode#AUTO} it asks the cluster with its Admin client whether it has an authorizer ({@code describeAcls}:
 * SecurityDisabledException means none, any other answer means one) and, until the cluster answers, serves nothing.
 * Where the cluster has an authorizer but the Admin client cannot take consumers' delegation tokens (no SASL), it
 * serves nothing at all and says what to set. A cluster without one is asked again every {@link #RECHECK_NANOS}, so
 * an authorizer added by a rolling restart is checked from then on. {@link AclMode#OFF} on a cluster with an
 * authorizer logs one WARN line.
 *
 * <p>Every exporter answers a token proof with its {@link ExporterAuthentication.Verdict}, so a consumer that proves a
 * token learns whether anything is checked before it takes a byte.
 */
final class AclGate implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(AclGate.class);
    private static final SecureRandom RANDOM = new SecureRandom();
    /** How often a cluster that had no authorizer is asked again ({@link AclMode#AUTO}). */
    private static final long RECHECK_NANOS = TimeUnit.MINUTES.toNanos(1);

    private final AclMode mode;
    private final Admin admin;
    private final ExporterConfig config;
    /** Null in {@link AclMode#OFF}. */
    private final TopicReadAuthorizer authorizer;
    /** Null until decided; then whether ACLs are checked. */
    private volatile Boolean checking;
    /** Why nothing is served: the cluster has an authorizer this exporter cannot check; null otherwise. */
    private volatile String cannotCheck;
    /** Completes at the first decision, or fails with {@link #cannotCheck}. */
    private final CompletableFuture<Void> firstDecision = new CompletableFuture<>();
    private final AtomicBoolean asking = new AtomicBoolean();
    private volatile boolean answeredOff;
    private volatile long nextAskNanos = System.nanoTime();
    private final AtomicBoolean warnedUnanswered = new AtomicBoolean();

    AclGate(ExporterConfig config, Admin admin, Map<String, Object> adminProperties) {
        this.mode = config.acls();
        this.admin = admin;
        this.config = config;
        this.authorizer = mode == AclMode.OFF ? null
                : new TopicReadAuthorizer(admin, adminProperties, config.tokenMechanism(), config.aclCache());
        if (mode != AclMode.AUTO) {
            checking = mode == AclMode.ON;
            firstDecision.complete(null);
        }
    }

    /**
     * Whether an answer to {@code describeAcls} shows an authorizer: null when it is no answer (the cluster could not
     * be reached or did not take the Admin client's login), so that it is asked again.
     */
    static Boolean authorizerShown(Throwable error) {
        Throwable cause = error instanceof CompletionException || error instanceof ExecutionException ? error.getCause() : error;
        if (cause == null) {
            return true;
        }
        if (cause instanceof SecurityDisabledException) {
            return false;
        }
        return cause instanceof RetriableException || cause instanceof AuthenticationException ? null : true;
    }

    /** Asks the cluster, one question at a time, while there is something to learn; the exporter's refresher calls it. */
    void decide() {
        boolean settled = switch (mode) {
            case ON -> true;
            case OFF -> answeredOff;
            case AUTO -> cannotCheck != null || Boolean.TRUE.equals(checking) || System.nanoTime() - nextAskNanos < 0;
        };
        if (settled || !asking.compareAndSet(false, true)) {
            return;
        }
        admin.describeAcls(AclBindingFilter.ANY).values().whenComplete((acls, error) -> {
            try {
                settle(authorizerShown(error), error);
            } finally {
                asking.set(false);
            }
        });
    }

    private void settle(Boolean authorizerPresent, Throwable error) {
        if (authorizerPresent == null) {
            Throwable cause = error.getCause() != null ? error.getCause() : error;
            if (mode == AclMode.AUTO && checking == null && warnedUnanswered.compareAndSet(false, true)) {
                LOG.warn("rdma4j log exporter: cannot tell yet whether the cluster at {} has an authorizer ({}); serving "
                        + "nothing until it answers (set {}=true or false to skip the question)", config.bootstrapServers(),
                        cause.toString(), ExporterConfig.ACLS);
            }
            return;
        }
        if (mode == AclMode.OFF) {
            answeredOff = true;
            if (authorizerPresent) {
                LOG.warn("rdma4j log exporter: {}=false on a cluster with an authorizer: every exported topic is served to "
                        + "any peer the rdma4j transport lets connect, whatever its Kafka ACLs", ExporterConfig.ACLS);
            }
        } else if (!authorizerPresent) {
            nextAskNanos = System.nanoTime() + RECHECK_NANOS;
            if (checking == null) {
                LOG.info("rdma4j log exporter: the cluster has no authorizer, so no ACLs are checked ({}=auto)", ExporterConfig.ACLS);
            }
            checking = false;
        } else if (!config.adminOnSasl()) {
            cannotCheck = "the cluster has an authorizer, and checking its ACLs " + config.cannotCheck();
            checking = null;
            LOG.error("rdma4j log exporter serves nothing: {}", cannotCheck);
        } else {
            LOG.info("rdma4j log exporter: the cluster has an authorizer, so a topic is served only to consumers that may "
                    + "READ it ({}=auto)", ExporterConfig.ACLS);
            checking = true;
        }
        if (cannotCheck != null) {
            firstDecision.completeExceptionally(new IllegalStateException(cannotCheck));
        } else if (checking != null) {
            firstDecision.complete(null);
        }
    }

    /**
     * Waits up to {@code limit} for the decision: the sidecar refuses to start where the cluster has an authorizer and it
     * cannot check it, and starts undecided (serving nothing until the cluster answers) where the cluster is silent.
     *
     * @throws IllegalStateException with what to set, when this exporter cannot check the cluster's ACLs
     */
    void awaitDecision(Duration limit) throws InterruptedException {
        decide();
        try {
            firstDecision.get(limit.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw (IllegalStateException) e.getCause();
        } catch (TimeoutException e) {
            // Logged by settle(); the refresher keeps asking.
        }
    }

    /** Answers a {@code KAFKA_AUTHENTICATE} request: the authorizer's when checking, else a verdict of no checks. */
    CompletionStage<ByteBuffer> authenticate(ByteBuffer body, RequestContext context) {
        if (checksNow()) {
            return authorizer.authenticate(body, context);
        }
        if (ExporterAuthentication.Request.fromBytes(body) instanceof ExporterAuthentication.Challenge) {
            byte[] nonce = new byte[ExporterAuthentication.NONCE_BYTES];
            RANDOM.nextBytes(nonce);
            return CompletableFuture.completedFuture(ByteBuffer.wrap(nonce));
        }
        return CompletableFuture.completedFuture(ByteBuffer.wrap(ExporterAuthentication.Verdict.ACLS_NOT_CHECKED.toBytes()));
    }

    /** Null when the connection may read {@code topic}, else why not; see {@link TopicReadAuthorizer#denial}. */
    CompletionStage<String> denial(RequestContext context, String topic) {
        return checksNow() ? authorizer.denial(context, topic) : CompletableFuture.completedFuture(null);
    }

    /** Whether ACLs are checked; refuses the request while that is not decided or cannot be done. */
    private boolean checksNow() {
        Boolean now = checking;
        if (now != null) {
            return now;
        }
        if (cannotCheck != null) {
            throw new RequestRefusedException("this exporter serves nothing: it cannot check the cluster's ACLs (see its "
                    + "log); fetch through Kafka");
        }
        throw new RequestRefusedException("this exporter does not know yet whether the cluster checks ACLs; fetch through "
                + "Kafka meanwhile");
    }

    /** The Kafka principal whose delegation token {@code connection} proved, or null (none proved, or no ACL checks). */
    String principal(io.rdma4j.core.RdmaConnection connection) {
        return authorizer == null ? null : authorizer.principal(connection);
    }

    /** ACL decisions made by asking the cluster; 0 where ACLs are never checked. */
    long aclDecisions() {
        return authorizer == null ? 0 : authorizer.decisionsMade();
    }

    /** Connections that proved a delegation token; 0 where ACLs are never checked. */
    long authenticated() {
        return authorizer == null ? 0 : authorizer.authenticated();
    }

    /** Token proofs refused. */
    long rejectedProofs() {
        return authorizer == null ? 0 : authorizer.rejectedProofs();
    }

    /** Times the cluster's delegation tokens were described. */
    long tokenListFetches() {
        return authorizer == null ? 0 : authorizer.tokenListFetches();
    }

    /** Requests refused because the requester may not READ the topic. */
    long refusals() {
        return authorizer == null ? 0 : authorizer.refusals();
    }

    /** Asks the cluster until it answered, and lets the authorizer forget closed connections and idle clients. */
    void sweep() {
        decide();
        if (authorizer != null) {
            authorizer.sweep();
        }
    }

    @Override
    public void close() {
        if (authorizer != null) {
            authorizer.close();
        }
    }
}
