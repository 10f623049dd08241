package io.rdma4j.kafka;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A real exporter that is slow to accept: a TCP relay in front of it takes each connection and relays it only once
 * {@link #release} is called, so a consumer's connect (its handshake) waits until then. The relay passes the tcp
 * provider's frames through unchanged.
 */
final class HeldExporter implements AutoCloseable {

    private final InetSocketAddress exporter;
    private final ServerSocket server;
    private final CountDownLatch released = new CountDownLatch(1);
    private final AtomicInteger accepted = new AtomicInteger();
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor();

    /** @param exporter where the exporter listens (on loopback) */
    HeldExporter(InetSocketAddress exporter) throws IOException {
        this.exporter = new InetSocketAddress(InetAddress.getLoopbackAddress(), exporter.getPort());
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        threads.submit(this::accept);
    }

    /** {@code rdma.exporter.address} of the held exporter. */
    String address() {
        return "127.0.0.1:" + server.getLocalPort();
    }

    /** Connections taken so far (held until {@link #release}, relayed after). */
    int accepted() {
        return accepted.get();
    }

    /** Relays the connections held, and every later one at once. */
    void release() {
        released.countDown();
    }

    private Void accept() {
        while (!server.isClosed()) {
            try {
                Socket in = server.accept();
                sockets.add(in);
                accepted.incrementAndGet();
                threads.submit(() -> relay(in));
            } catch (IOException closed) {
                return null;
            }
        }
        return null;
    }

    private Void relay(Socket in) throws Exception {
        released.await();
        Socket out = new Socket(exporter.getAddress(), exporter.getPort());
        sockets.add(out);
        in.setTcpNoDelay(true);
        out.setTcpNoDelay(true);
        threads.submit(() -> pump(in, out));
        pump(out, in);
        return null;
    }

    private static Void pump(Socket from, Socket to) {
        try {
            from.getInputStream().transferTo(to.getOutputStream());
        } catch (IOException closed) {
            // either side went away: both go
        } finally {
            closeQuietly(from);
            closeQuietly(to);
        }
        return null;
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing
        }
    }

    @Override
    public void close() throws IOException {
        server.close();
        sockets.forEach(HeldExporter::closeQuietly);
        threads.shutdownNow();
    }
}
