package io.rdma4j.spark;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/** Idle peer connections close, held ones never do, and the next fetch reconnects: on real tcp transports. */
class PeerConnectionsTest {

    private RdmaTransport server;
    private RdmaTransport client;
    private RdmaListener listener;
    private final AtomicInteger connects = new AtomicInteger();

    @BeforeEach
    void open() {
        TransportConfig tcp = TransportConfig.fromProperties(Map.of("p.provider", "tcp"), "p.");
        server = RdmaTransport.open(tcp);
        client = RdmaTransport.open(tcp);
        listener = server.listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), c -> { });
    }

    @AfterEach
    void close() {
        client.close();
        listener.close();
        server.close();
    }

    private PeerConnections connections(Duration idle) {
        return new PeerConnections(idle, (peer, address) -> {
            connects.incrementAndGet();
            try {
                return client.connect(address).get(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new PeerUnreachableException(peer, e.toString(), e);
            }
        });
    }

    @Test
    void anIdleConnectionClosesAndTheNextFetchReconnects() throws Exception {
        long closedBefore = RdmaShuffleMetrics.IDLE_CONNECTIONS_CLOSED.getCount();
        long reconnectsBefore = RdmaShuffleMetrics.RECONNECTS.getCount();
        try (PeerConnections peers = connections(Duration.ofMillis(200))) {
            RdmaConnection first;
            try (PeerConnections.Lease lease = peers.acquire("1", listener.localAddress())) {
                first = lease.connection();
                try (PeerConnections.Lease shared = peers.acquire("1", listener.localAddress())) {
                    assertThat(shared.connection()).as("one connection per peer").isSameAs(first);
                }
            }
            awaitClosed(first);
            assertThat(peers.size()).isZero();
            assertThat(RdmaShuffleMetrics.IDLE_CONNECTIONS_CLOSED.getCount() - closedBefore).isEqualTo(1);
            try (PeerConnections.Lease again = peers.acquire("1", listener.localAddress())) {
                assertThat(again.connection()).isNotSameAs(first);
                assertThat(again.connection().isOpen()).isTrue();
            }
            assertThat(connects.get()).isEqualTo(2);
            assertThat(RdmaShuffleMetrics.RECONNECTS.getCount() - reconnectsBefore).isEqualTo(1);
        }
    }

    @Test
    void aHeldConnectionIsNeverClosedForIdleness() throws Exception {
        try (PeerConnections peers = connections(Duration.ofMillis(100))) {
            PeerConnections.Lease held = peers.acquire("1", listener.localAddress());
            Thread.sleep(600); // several idle timeouts and reaper rounds
            peers.closeIdle();
            assertThat(held.connection().isOpen()).isTrue();
            assertThat(peers.size()).isEqualTo(1);
            held.close();
            held.close(); // a second close must not count twice
            awaitClosed(held.connection());
        }
    }

    @Test
    void aForgottenConnectionIsReplacedAtTheNextFetch() throws Exception {
        try (PeerConnections peers = connections(Duration.ofMinutes(2))) {
            RdmaConnection broken;
            try (PeerConnections.Lease lease = peers.acquire("1", listener.localAddress())) {
                broken = lease.connection();
                peers.forget("1", broken);
            }
            assertThat(broken.isOpen()).isFalse();
            try (PeerConnections.Lease lease = peers.acquire("1", listener.localAddress())) {
                assertThat(lease.connection()).isNotSameAs(broken);
                assertThat(lease.connection().isOpen()).isTrue();
            }
        }
    }

    private static void awaitClosed(RdmaConnection connection) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (connection.isOpen() && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertThat(connection.isOpen()).as("closed after the idle timeout").isFalse();
    }
}
