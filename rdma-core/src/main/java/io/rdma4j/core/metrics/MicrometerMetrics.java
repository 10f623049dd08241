package io.rdma4j.core.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;

import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Binds {@link TransportMetrics} to a Micrometer registry (Micrometer is optional at runtime: only
 * this class needs it). Meters, all tagged {@code provider}:
 * <ul>
 * <li>{@code rdma4j.operations} (counter; {@code operation}, {@code outcome=success|error})</li>
 * <li>{@code rdma4j.operation.bytes} (counter, bytes; {@code operation})</li>
 * <li>{@code rdma4j.operation.latency} (timer; {@code operation}), successful operations</li>
 * <li>{@code rdma4j.operations.in.flight} (gauge)</li>
 * <li>{@code rdma4j.served.bytes} (counter, bytes served to peers as a responder; {@code operation})</li>
 * <li>{@code rdma4j.requests.rejected} (counter, peer requests refused as a responder)</li>
 * <li>{@code rdma4j.regions.registered}, {@code rdma4j.regions.registered.bytes}, {@code rdma4j.connections.open} (gauges)</li>
 * <li>{@code rdma4j.buffered.bytes} (gauge, bytes held for peers: unreceived messages, unwritten responses)</li>
 * <li>{@code rdma4j.message.buffers.bytes} (gauge, memory the provider registered for its message buffers)</li>
 * <li>{@code rdma4j.handshakes.displaced} (counter, sockets closed in their handshake to admit newer ones)</li>
 * </ul>
 */
// Micrometer's types in this API need no 'requires transitive': whoever binds meters to a registry requires Micrometer.
@SuppressWarnings("exports")
public final class MicrometerMetrics implements MeterBinder {

    private final TransportMetrics metrics;
    private final Tags tags;

    public MicrometerMetrics(TransportMetrics metrics, Iterable<Tag> extraTags) {
        this.metrics = metrics;
        this.tags = Tags.of("provider", metrics.provider()).and(extraTags);
    }

    public MicrometerMetrics(TransportMetrics metrics) {
        this(metrics, Tags.empty());
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        Map<OperationType, Timer> timers = new EnumMap<>(OperationType.class);
        for (OperationType type : OperationType.values()) {
            Tags opTags = tags.and("operation", type.tagValue());
            FunctionCounter.builder("rdma4j.operations", metrics, m -> m.snapshot(type).successes())
                    .tags(opTags.and("outcome", "success")).description("Operations started by this side").register(registry);
            FunctionCounter.builder("rdma4j.operations", metrics, m -> m.snapshot(type).errors())
                    .tags(opTags.and("outcome", "error")).description("Operations started by this side").register(registry);
            FunctionCounter.builder("rdma4j.operation.bytes", metrics, m -> m.snapshot(type).bytes())
                    .tags(opTags).baseUnit("bytes").description("Bytes moved by operations started by this side").register(registry);
            FunctionCounter.builder("rdma4j.served.bytes", metrics, m -> m.servedBytes(type))
                    .tags(opTags).baseUnit("bytes").description("Bytes served to peers as a responder").register(registry);
            timers.put(type, Timer.builder("rdma4j.operation.latency").tags(opTags)
                    .description("Latency of successful operations").register(registry));
        }
        Gauge.builder("rdma4j.operations.in.flight", metrics, TransportMetrics::inFlight).tags(tags)
                .description("Operations started and not yet finished").register(registry);
        FunctionCounter.builder("rdma4j.requests.rejected", metrics, TransportMetrics::rejectedRequests).tags(tags)
                .description("Peer requests refused as a responder").register(registry);
        Gauge.builder("rdma4j.regions.registered", metrics, TransportMetrics::registeredRegions).tags(tags)
                .description("Registered memory regions").register(registry);
        Gauge.builder("rdma4j.regions.registered.bytes", metrics, TransportMetrics::registeredBytes).tags(tags)
                .baseUnit("bytes").description("Registered memory").register(registry);
        Gauge.builder("rdma4j.connections.open", metrics, TransportMetrics::openConnections).tags(tags)
                .description("Open connections").register(registry);
        Gauge.builder("rdma4j.buffered.bytes", metrics, TransportMetrics::bufferedBytes).tags(tags).baseUnit("bytes")
                .description("Bytes held for peers: messages not yet received, responses not yet written").register(registry);
        Gauge.builder("rdma4j.message.buffers.bytes", metrics, TransportMetrics::messageBufferBytes).tags(tags).baseUnit("bytes")
                .description("Memory the provider registered for its own message buffers, apart from the regions")
                .register(registry);
        Gauge.builder("rdma4j.receive.credits.lent", metrics, TransportMetrics::lentReceiveCredits).tags(tags)
                .description("Receive credits lent from the shared pool to peers with more to send (verbs)")
                .register(registry);
        FunctionCounter.builder("rdma4j.handshakes.displaced", metrics, TransportMetrics::displacedHandshakes).tags(tags)
                .description("Sockets closed in their handshake to admit newer ones").register(registry);
        metrics.addListener((type, bytes, nanos, success) -> {
            if (success) {
                timers.get(type).record(nanos, TimeUnit.NANOSECONDS);
            }
        });
    }
}
