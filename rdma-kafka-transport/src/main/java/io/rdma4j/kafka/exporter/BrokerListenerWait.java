package io.rdma4j.kafka.exporter;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;

/**
 * Waits until a broker's listener accepts connections. The broker configures its metrics reporters before it listens,
 * and a Kafka client that meets a refused connection logs a WARN line: the plugin's Admin client starts after this.
 * A bare TCP connect is enough, and the broker does not log it.
 */
final class BrokerListenerWait {

    private static final Duration CONNECT_TIMEOUT = Duration.ofMillis(500);
    private static final long RETRY_MILLIS = 100;

    private BrokerListenerWait() {
    }

    /** Returns once {@code hostPort} accepts a connection. */
    static void await(String hostPort) throws InterruptedException {
        InetSocketAddress address = ExporterConfig.parseAddress(hostPort);
        while (true) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(address.getHostString(), address.getPort()), (int) CONNECT_TIMEOUT.toMillis());
                return;
            } catch (IOException e) {
                // not listening yet
            }
            Thread.sleep(RETRY_MILLIS);
        }
    }
}
