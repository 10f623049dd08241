package io.rdma4j.spark;

import com.codahale.metrics.Counter;
import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import com.codahale.metrics.Timer;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.core.metrics.TransportMetrics;

import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.ToLongFunction;

/**
 * This JVM's RDMA shuffle figures, which {@link RdmaShufflePlugin} puts into Spark's metrics system. One set per JVM,
 * as one executor runs in it; the shuffle manager and the plugin share it.
 */
final class RdmaShuffleMetrics {

    /** Why a reader used Spark's block transfer instead of rdma4j. */
    enum FallbackReason {
        /** The executor's transport could not start (no usable provider, a bad option). */
        TRANSPORT_UNAVAILABLE("transportUnavailable"),
        /** A peer executor could not be reached by rdma4j. */
        PEER_UNREACHABLE("peerUnreachable"),
        /** An executor (a peer, or this one) could not register map outputs for RDMA reads: their blocks came through Spark. */
        NOT_SERVED("notServed"),
        /** This executor could not register a buffer to read a peer's blocks into: those blocks came through Spark. */
        NO_READ_BUFFER("noReadBuffer");

        final String metricName;

        FallbackReason(String metricName) {
            this.metricName = metricName;
        }
    }

    static final Counter BLOCKS_FETCHED = new Counter();
    static final Counter HOST_LOCAL_BLOCKS = new Counter();
    static final Counter MAP_OUTPUTS_REGISTERED = new Counter();
    /** Map outputs this executor could not register when a reader asked for them (a registered-memory limit). */
    static final Counter MAP_OUTPUTS_NOT_SERVED = new Counter();
    static final Timer REGISTRATION_TIME = new Timer();
    /** Connections to peers closed after spark.shuffle.rdma.connectionIdleTimeout unused. */
    static final Counter IDLE_CONNECTIONS_CLOSED = new Counter();
    /** Connections opened again to a peer this executor had been connected to. */
    static final Counter RECONNECTS = new Counter();
    private static final Counter[] FALLBACKS = new Counter[FallbackReason.values().length];
    /** Providers that get a gauge of their own (1 while in use), as a sink carries numbers only. */
    static final String[] PROVIDERS = {"tcp", "verbs"};

    static {
        for (int i = 0; i < FALLBACKS.length; i++) {
            FALLBACKS[i] = new Counter();
        }
    }

    private static volatile RdmaTransport transport;

    private RdmaShuffleMetrics() {
    }

    static void fellBack(FallbackReason reason) {
        FALLBACKS[reason.ordinal()].inc();
    }

    static void mapOutputRegistered(long nanos) {
        MAP_OUTPUTS_REGISTERED.inc();
        REGISTRATION_TIME.update(nanos, TimeUnit.NANOSECONDS);
    }

    /**
     * The executor's transport from now on: the READ figures and the provider come from it. Kept after it closes, as
     * the executor's last metrics report comes after its shuffle manager stopped.
     */
    static void transport(RdmaTransport current) {
        transport = current;
    }

    /**
     * Registers the metrics under their names: {@code bytesRead}, {@code reads} (RDMA READs issued by this executor's
     * transport, index and checksum reads included), {@code blocksFetched} (blocks handed to Spark from peers by
     * RDMA), {@code hostLocalBlocks} (blocks read from the files of executors on the same host),
     * {@code fallbacks.<reason>}, {@code mapOutputsRegistered}, {@code registrationTime}, {@code connections}
     * (open), {@code connections.closedIdle}, {@code connections.reconnects}, {@code bufferedBytes} (what peers make
     * the executor hold, bounded on tcp by tcp.maxBufferedBytes), {@code messageBufferBytes} (memory the provider
     * registered for its message buffers), {@code receiveCreditsLent} (verbs: the shared receive pool in use) and
     * {@code provider.<name>} (1 for the provider in use).
     */
    static void registerIn(MetricRegistry registry) {
        registry.register("bytesRead", reads(true));
        registry.register("reads", reads(false));
        registry.register("blocksFetched", BLOCKS_FETCHED);
        registry.register("hostLocalBlocks", HOST_LOCAL_BLOCKS);
        for (FallbackReason reason : FallbackReason.values()) {
            registry.register("fallbacks." + reason.metricName, FALLBACKS[reason.ordinal()]);
        }
        registry.register("mapOutputsRegistered", MAP_OUTPUTS_REGISTERED);
        registry.register("mapOutputsNotServed", MAP_OUTPUTS_NOT_SERVED);
        registry.register("registrationTime", REGISTRATION_TIME);
        registry.register("connections", transportGauge(TransportMetrics::openConnections));
        registry.register("connections.closedIdle", IDLE_CONNECTIONS_CLOSED);
        registry.register("connections.reconnects", RECONNECTS);
        registry.register("bufferedBytes", transportGauge(TransportMetrics::bufferedBytes));
        registry.register("messageBufferBytes", transportGauge(TransportMetrics::messageBufferBytes));
        registry.register("receiveCreditsLent", transportGauge(TransportMetrics::lentReceiveCredits));
        for (String provider : PROVIDERS) {
            registry.register("provider." + provider, (Gauge<Integer>) () -> {
                RdmaTransport t = transport;
                return t != null && t.provider().toLowerCase(Locale.ROOT).equals(provider) ? 1 : 0;
            });
        }
    }

    private static Gauge<Long> transportGauge(ToLongFunction<TransportMetrics> figure) {
        return () -> {
            RdmaTransport t = transport;
            return t == null ? 0L : figure.applyAsLong(t.metrics());
        };
    }

    private static Gauge<Long> reads(boolean bytes) {
        return () -> {
            RdmaTransport t = transport;
            if (t == null) {
                return 0L;
            }
            TransportMetrics.Snapshot reads = t.metrics().snapshot(OperationType.READ);
            return bytes ? reads.bytes() : reads.count();
        };
    }
}
