package io.rdma4j.spring.boot;

import io.rdma4j.core.RdmaListener;
import io.rdma4j.core.RdmaTransport;
import org.springframework.context.SmartLifecycle;

import java.net.InetSocketAddress;
import java.util.concurrent.CountDownLatch;

/**
 * The listening endpoint peers connect to: it answers directory lookups for the regions the
 * {@link RdmaTemplate} publishes, and peers then read those regions one-sided.
 *
 * <p>A server in the context's lifecycle: it starts after every singleton exists (so {@link RdmaRegion}
 * methods have published) and stops in {@link #PHASE}, just after the web server's graceful shutdown, so
 * HTTP requests still in flight can use it. On stop it stops accepting, then closes the lookup
 * connections; regions are deregistered afterwards when the template is destroyed, and the transport
 * closes last. While it runs, a non-daemon thread (as Tomcat's await thread) keeps the JVM alive, so an
 * application with no web server keeps serving peers until its context is closed.
 */
public class RdmaEndpoint implements SmartLifecycle, AutoCloseable {

    /**
     * One below the phase of Boot's web server graceful shutdown ({@code SmartLifecycle.DEFAULT_PHASE - 1024}
     * on Boot 3.5 and 4.1): lifecycles stop in descending phase order, so the endpoint stops after the web
     * server has drained its requests and before the web server itself stops (phase
     * {@code DEFAULT_PHASE - 2048}, which also starts it before the endpoint).
     */
    public static final int PHASE = SmartLifecycle.DEFAULT_PHASE - 1024 - 1;

    /** Name of the non-daemon thread that keeps the JVM alive while the endpoint runs. */
    public static final String KEEP_ALIVE_THREAD_NAME = "rdma4j-endpoint-keep-alive";

    private static final System.Logger LOG = System.getLogger(RdmaEndpoint.class.getName());

    private final RdmaTransport transport;
    private final RdmaTemplate template;
    private final InetSocketAddress bindAddress;
    private final boolean failFast;
    private volatile RdmaListener listener;
    private volatile RuntimeException failure;
    private CountDownLatch stopped;

    /** An endpoint whose failure to listen fails the context's start. */
    public RdmaEndpoint(RdmaTransport transport, RdmaTemplate template, InetSocketAddress bindAddress) {
        this(transport, template, bindAddress, true);
    }

    /**
     * @param failFast whether a failure to listen fails the context's start; when false it is logged,
     *                 {@link #failure()} keeps it and health reports DOWN
     */
    public RdmaEndpoint(RdmaTransport transport, RdmaTemplate template, InetSocketAddress bindAddress, boolean failFast) {
        this.transport = transport;
        this.template = template;
        this.bindAddress = bindAddress;
        this.failFast = failFast;
    }

    @Override
    public synchronized void start() {
        if (listener != null) {
            return;
        }
        if (transport instanceof UnavailableRdmaTransport unavailable) {
            // fail-fast=false: the application runs without RDMA and health says why.
            LOG.log(System.Logger.Level.WARNING, "rdma4j endpoint not started: " + unavailable.failure().getMessage());
            return;
        }
        try {
            listener = transport.listen(bindAddress, template.requestHandlers(), template::accepted);
        } catch (RuntimeException e) {
            if (failFast) {
                throw e;
            }
            failure = e;
            LOG.log(System.Logger.Level.WARNING, "rdma4j endpoint failed to listen on " + bindAddress
                    + "; running without it (rdma4j.fail-fast=false): " + e.getMessage());
            return;
        }
        failure = null;
        stopped = new CountDownLatch(1);
        keepAlive(stopped);
        LOG.log(System.Logger.Level.INFO, "rdma4j endpoint listening on " + listener.localAddress() + " (" + transport.provider() + ")");
    }

    @Override
    public synchronized void stop() {
        RdmaListener current = listener;
        listener = null;
        if (current != null) {
            try {
                current.close();
                template.closeServedConnections();
            } finally {
                stopped.countDown();
            }
        }
    }

    /** Stops the endpoint when the context is destroyed without its lifecycle having stopped it (a failed refresh). */
    @Override
    public void close() {
        stop();
    }

    /** Starts the thread that keeps the JVM alive until {@code stopped} opens (the listener's own threads may be daemons). */
    private static void keepAlive(CountDownLatch stopped) {
        Thread.ofPlatform().name(KEEP_ALIVE_THREAD_NAME).daemon(false).start(() -> {
            try {
                stopped.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
    }

    @Override
    public int getPhase() {
        return PHASE;
    }

    @Override
    public boolean isRunning() {
        return listener != null;
    }

    /** Why the endpoint could not listen at its last start ({@code rdma4j.fail-fast=false}), or null. */
    public RuntimeException failure() {
        return failure;
    }

    /** The bound address, with the actual port when port 0 was asked for. */
    public InetSocketAddress localAddress() {
        RdmaListener current = listener;
        if (current == null) {
            throw new IllegalStateException("the rdma4j endpoint is not running");
        }
        return current.localAddress();
    }
}
