package io.rdma4j.netty;

import io.netty.channel.ChannelPromise;
import io.netty.channel.ConnectTimeoutException;
import io.netty.util.concurrent.Future;
import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A connect in progress, on the channel's loop: rdma4j connects on its own threads and posts the outcome; Netty's
 * {@code CONNECT_TIMEOUT_MILLIS} fails the promise first if it is shorter than rdma4j's connect-timeout, and the
 * promise can be cancelled meanwhile (a connection that arrives after either is closed).
 */
final class PendingConnect {

    private final InetSocketAddress remote;
    private ChannelPromise promise;
    private Future<?> timeout;
    /** This attempt went to plain TCP at once, for a peer remembered without rdma4j. */
    private boolean skippedRdma4j;
    /** This attempt has tried plain TCP: it does not again. */
    private boolean plainTried;
    /**
     * Why rdma4j's connect failed, where this attempt went on over plain TCP: the peer is remembered without rdma4j
     * only once a plain connect succeeds (refused as well, it may be an rdma4j server restarting).
     */
    private Throwable rdma4jFailure;

    private PendingConnect(InetSocketAddress remote, ChannelPromise promise) {
        this.remote = remote;
        this.promise = promise;
    }

    /** Starts connecting; {@code close} closes the channel when the timeout or a cancel ends the attempt. */
    static PendingConnect start(RdmaSocketChannel channel, RdmaTransport transport, InetSocketAddress remote,
                                ChannelPromise promise, Runnable close, Consumer<RdmaEvent> post) {
        TcpFallback.Remembered plainPeer = TcpFallback.allowed(channel.config(), transport.config())
                ? TcpFallback.remembered(remote) : null;
        CompletableFuture<RdmaConnection> connecting = plainPeer != null ? CompletableFuture.failedFuture(plainPeer)
                : transport.connect(remote);
        PendingConnect pending = new PendingConnect(remote, promise);
        pending.skippedRdma4j = plainPeer != null;
        int timeoutMillis = channel.config().getConnectTimeoutMillis();
        if (timeoutMillis > 0) {
            pending.timeout = channel.eventLoop().schedule(() -> {
                ChannelPromise p = pending.promise;
                if (p != null && p.tryFailure(new ConnectTimeoutException(
                        "connection timed out after " + timeoutMillis + " ms: " + remote))) {
                    pending.promise = null;
                    close.run();
                }
            }, timeoutMillis, TimeUnit.MILLISECONDS);
        }
        promise.addListener(f -> {
            if (f.isCancelled()) {
                pending.end();
                close.run();
            }
        });
        connecting.whenComplete((c, failure) -> post.accept(new RdmaEvent.Connected(c, failure)));
        return pending;
    }

    /** The attempt is over: the promise still to complete, or null when the timeout or a cancel completed it. */
    ChannelPromise end() {
        if (timeout != null) {
            timeout.cancel(false);
            timeout = null;
        }
        ChannelPromise p = promise;
        promise = null;
        return p;
    }

    /**
     * rdma4j's connect failed: where the failure says the peer does not run rdma4j and the channel lets it
     * ({@link RdmaChannelOption#TCP_FALLBACK}), connects over plain TCP instead, under the same promise and timeout:
     * {@code adopt} takes the socket, {@code connected} learns the outcome on the loop. False when it does not.
     */
    boolean fallBack(Throwable failure, RdmaSocketChannel channel, RdmaTransport transport, Consumer<PlainSocket> adopt,
                     Consumer<Throwable> connected) {
        if (promise == null || plainTried || !TcpFallback.allowed(channel.config(), transport.config())
                || !TcpFallback.applies(failure)) {
            return false;
        }
        plainTried = true;
        rdma4jFailure = failure;
        PlainSocket plain;
        try {
            plain = PlainSocket.open(channel);
        } catch (IOException e) {
            connected.accept(e);
            return true;
        }
        adopt.accept(plain);
        plain.connect(remote, connected);
        return true;
    }

    /** The plain connect succeeded, so the peer does not run rdma4j and is remembered so; then as {@link #end}. */
    ChannelPromise endConnectedOverPlainTcp() {
        if (rdma4jFailure != null) {
            TcpFallback.found(remote, rdma4jFailure);
        }
        return end();
    }

    /**
     * The plain connect failed where this attempt skipped rdma4j for a peer remembered without it: that peer may run
     * rdma4j now (a service that took it up on the same address; a verbs listener has no TCP port to accept a plain
     * connect), so it is forgotten and rdma4j is tried, under the same promise and timeout. False when rdma4j was
     * tried already, or the attempt is over.
     */
    boolean tryRdma4jInstead(RdmaTransport transport, Consumer<RdmaEvent> post) {
        if (promise == null || !skippedRdma4j) {
            return false;
        }
        skippedRdma4j = false;
        TcpFallback.forget(remote);
        CompletableFuture<RdmaConnection> connecting;
        try {
            connecting = transport.connect(remote);
        } catch (RuntimeException e) {
            connecting = CompletableFuture.failedFuture(e);
        }
        connecting.whenComplete((c, failure) -> post.accept(new RdmaEvent.Connected(c, failure)));
        return true;
    }

    /** rdma4j's connect failed: the promise fails with what a socket's connect fails with. */
    boolean fail(Throwable failure) {
        ChannelPromise p = end();
        return p != null && p.tryFailure(RdmaErrors.connectFailed(failure, remote));
    }
}
