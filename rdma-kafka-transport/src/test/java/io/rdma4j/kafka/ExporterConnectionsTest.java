package io.rdma4j.kafka;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A consumer's exporter connections on real tcp transports: set up without the caller waiting, idle ones close, used
 * ones get keepalives, reconnects count.
 */
class ExporterConnectionsTest {

    private static final TransportConfig TCP = TransportConfig.fromProperties(Map.of("p.provider", "tcp"), "p.");

    @Test
    void anExporterLeftUnusedIsLetGoAndConnectingAgainCounts() throws Exception {
        AtomicInteger keepalives = new AtomicInteger();
        RequestHandlers handlers = RequestHandlers.of(RequestTypes.KAFKA_KEEPALIVE,
                RequestHandler.answering((body, context) -> {
                    keepalives.incrementAndGet();
                    return ByteBuffer.allocate(0);
                }));
        AtomicInteger reconnects = new AtomicInteger();
        try (RdmaTransport exporters = RdmaTransport.open(TCP); RdmaTransport consumer = RdmaTransport.open(TCP)) {
            InetSocketAddress loopback = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
            RdmaListener a = exporters.listen(loopback, handlers);
            RdmaListener b = exporters.listen(loopback, handlers);
            ExporterConnections.Timing timing = new ExporterConnections.Timing(Duration.ofSeconds(1), Duration.ofMillis(100),
                    Duration.ofMillis(300));
            try (ExporterConnections connections = new ExporterConnections(consumer, timing, null, reconnects::incrementAndGet)) {
                RdmaConnection toA = ready(connections, a.localAddress());
                assertThat(toA.isOpen()).isTrue();
                ready(connections, b.localAddress());
                long until = System.nanoTime() + Duration.ofMillis(600).toNanos();
                while (System.nanoTime() < until) { // only B is used from now on
                    assertThat(connections.get(b.localAddress()).isOpen()).isTrue();
                    Thread.sleep(20);
                }
                assertThat(toA.isOpen()).as("A unused for longer than connections.max.idle.ms").isFalse();
                assertThat(keepalives.get()).as("B, used, got keepalives every 100 ms").isGreaterThanOrEqualTo(3);
                assertThat(reconnects.get()).isZero();
                RdmaConnection again = ready(connections, a.localAddress());
                assertThat(again).isNotSameAs(toA);
                assertThat(again.isOpen()).isTrue();
                assertThat(reconnects.get()).as("connecting to A again counts").isEqualTo(1);
            }
        }
    }

    @Test
    void anExporterThatCannotBeReachedIsTriedAgainOnlyAfterTheBackoff() throws Exception {
        try (RdmaTransport consumer = RdmaTransport.open(TCP)) {
            InetSocketAddress nobody;
            try (var s = new java.net.ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                nobody = new InetSocketAddress(InetAddress.getLoopbackAddress(), s.getLocalPort());
            }
            try (ExporterConnections connections = new ExporterConnections(consumer,
                    ExporterConnections.Timing.of(Duration.ofHours(1)), null, () -> { })) {
                assertThat(connections.get(nobody)).isNull();
                var settling = connections.settling(nobody);
                if (settling != null) {
                    assertThat(connections.whyNot(nobody)).isEqualTo(FallbackReason.EXPORTER_CONNECTING);
                    settling.handle((s, e) -> null).get(30, java.util.concurrent.TimeUnit.SECONDS);
                }
                assertThat(connections.get(nobody)).isNull();
                assertThat(connections.whyNot(nobody)).isEqualTo(FallbackReason.EXPORTER_UNREACHABLE);
                assertThat(connections.get(nobody)).isNull();
                assertThat(connections.settling(nobody)).as("no new connect within the backoff").isNull();
            }
        }
    }

    @Test
    void exportersConnectedEarlyAreReadyWhenAPartitionIsLocatedThereAndTheOthersClose() throws Exception {
        AtomicInteger reconnects = new AtomicInteger();
        try (RdmaTransport exporters = RdmaTransport.open(TCP); RdmaTransport consumer = RdmaTransport.open(TCP)) {
            InetSocketAddress loopback = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
            RdmaListener a = exporters.listen(loopback, RequestHandlers.none());
            RdmaListener b = exporters.listen(loopback, RequestHandlers.none());
            InetSocketAddress nobody;
            try (var s = new java.net.ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                nobody = new InetSocketAddress(InetAddress.getLoopbackAddress(), s.getLocalPort());
            }
            try (ExporterConnections connections = new ExporterConnections(consumer,
                    ExporterConnections.Timing.of(Duration.ofHours(1)), null, reconnects::incrementAndGet)) {
                connections.connectEarly(java.util.List.of(a.localAddress(), b.localAddress(), nobody), java.util.List.of("t"));
                var toNobody = connections.settling(nobody);
                RdmaConnection toA = connectedEarly(connections, a.localAddress());
                RdmaConnection toB = connectedEarly(connections, b.localAddress());
                assertThat(toA.isOpen()).as("connected to A, before any partition is located there").isTrue();
                if (toNobody != null) {
                    toNobody.handle((x, e) -> null).get(30, java.util.concurrent.TimeUnit.SECONDS);
                }

                RdmaConnection c = connections.get(a.localAddress(), java.util.List.of(new org.apache.kafka.common.TopicPartition("t", 0)));
                assertThat(c).as("A's connection, ready at the first ask for a partition there").isSameAs(toA);
                // Something listens there now that never answers the handshake, so a connect started stays pending
                // (a refused one could fail, and back off, before the next line looks).
                try (var silent = new java.net.ServerSocket()) {
                    silent.setReuseAddress(true);
                    silent.bind(nobody);
                    assertThat(connections.get(nobody, java.util.List.of(new org.apache.kafka.common.TopicPartition("t", 1))))
                            .as("the failed early connect left no backoff: connecting again").isNull();
                    assertThat(connections.whyNot(nobody)).isEqualTo(FallbackReason.EXPORTER_CONNECTING);
                }

                connections.closeUnlocated(java.util.Set.of(), false);
                assertThat(toB.isOpen()).as("B, unused for less than the idle limit").isTrue();
                connections.closeUnlocated(java.util.Set.of(a.localAddress()), true);
                assertThat(toB.isOpen()).as("B, where no partition was located").isFalse();
                assertThat(connections.connectedEarly()).as("nothing left connected early").isFalse();
                assertThat(c.isOpen()).isTrue();
                assertThat(ready(connections, b.localAddress())).as("B connected again when asked").isNotNull();
                assertThat(reconnects.get()).as("connecting to B once it is asked for is no reconnect").isZero();
            }
        }
    }

    /**
     * The connection {@link ExporterConnections#connectEarly} set up to {@code exporter}: the setup's once it is done, or,
     * where the connect was done before {@code connectEarly} returned, the connection taken over then.
     */
    private static RdmaConnection connectedEarly(ExporterConnections connections, InetSocketAddress exporter) throws Exception {
        var settling = connections.settling(exporter);
        if (settling != null) {
            return ((ExporterSetup.Setup) settling.get(30, java.util.concurrent.TimeUnit.SECONDS)).connection();
        }
        RdmaConnection c = connections.get(exporter);
        assertThat(c).as("no connect under way to " + exporter + ", so it is open").isNotNull();
        return c;
    }

    /** Asks for the connection until it is set up (the first ask starts it). */
    private static RdmaConnection ready(ExporterConnections connections, InetSocketAddress exporter) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        RdmaConnection c;
        while ((c = connections.get(exporter)) == null) {
            assertThat(System.nanoTime()).as("connected to %s within 30 s (%s)", exporter, connections.whyNot(exporter))
                    .isLessThan(deadline);
            Thread.sleep(5);
        }
        return c;
    }
}
