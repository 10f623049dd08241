package io.rdma4j.kafka;

import org.apache.kafka.common.security.token.delegation.DelegationToken;

import java.time.Duration;
import java.util.Map;

/**
 * One consumer's hold on the delegation token it proves to log exporters that check Kafka ACLs
 * ({@code rdma.exporter.authentication=delegation-token}): the {@link SharedDelegationToken} of every consumer in this
 * JVM with its cluster and security settings, created with those settings, so its owner is the consumer's principal.
 * The consumer's connections prove the latest token and read on with a replaced one until they have proven the new
 * one; then this consumer lets go of the replaced one ({@link #letGo}), which is expired once every consumer
 * has. Closing lets go of the token, which outlives the last consumer by {@code rdma.exporter.token.linger.ms}.
 *
 * <p>Threads: {@link #current}, {@link #letGo} and {@link #close} may call the cluster and run on the
 * consumer's setup thread only ({@link ExporterSetup}); the polling thread reads {@link #latest}, {@link #retiring},
 * {@link #due} and {@link #usable}, which touch only volatile fields, and calls {@link #refused} and {@link #closing}.
 */
final class DelegationTokenCredentials implements AutoCloseable {

    private final SharedDelegationToken shared;
    private final Duration linger;
    private volatile boolean closed;
    /** The replaced token this consumer let go of: it no longer asks for it to be expired. */
    private volatile DelegationToken letGoOf;

    /**
     * @param kafkaConfigs the consumer's Kafka settings; those an Admin client knows are used
     * @param linger       how long the token outlives the last consumer that holds it
     */
    DelegationTokenCredentials(Map<String, ?> kafkaConfigs, Duration lifetime, Duration retryBackoff, Duration linger) {
        this.linger = linger;
        this.shared = SharedDelegationToken.lease(this, kafkaConfigs, lifetime, retryBackoff);
    }

    /** The consumer closes: it asks for no token any more; {@link #close}, which follows, lets go of it. */
    void closing() {
        closed = true;
    }

    /** The token to prove now, created or replaced as needed; null while none can be created (logged). Setup thread only. */
    DelegationToken current() {
        return closed ? null : shared.current();
    }

    /** The token last created, or null; what connections should have proven. */
    DelegationToken latest() {
        return shared.latest();
    }

    /** The token the latest one replaced, until this consumer let go of it; null when none. */
    DelegationToken retiring() {
        DelegationToken r = shared.retiring();
        return r == letGoOf ? null : r;
    }

    /** Whether {@link #current} would create a token now: none yet, or the current one due for replacement. */
    boolean due() {
        return shared.due();
    }

    /** Whether a connection that proved {@code proven} may read with it: it is the latest or retiring token, and alive. */
    boolean usable(DelegationToken proven) {
        return shared.usable(proven);
    }

    /** No connection of this consumer holds {@code old}, the token the latest one replaced. Setup thread only. */
    void letGo(DelegationToken old) {
        if (old != null) {
            letGoOf = old;
            shared.released(this, old);
        }
    }

    /** An exporter refused {@code refused}: see {@link SharedDelegationToken#refused}. */
    void refused(DelegationToken refused) {
        shared.refused(refused);
    }

    /** Lets go of the token. Setup thread only, after {@link #closing}. */
    @Override
    public void close() {
        closed = true;
        shared.release(this, linger);
    }
}
