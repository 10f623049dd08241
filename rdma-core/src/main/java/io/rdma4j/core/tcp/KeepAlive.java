package io.rdma4j.core.tcp;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A connection's liveness under {@code tcp.idle-timeout}: whether the peer went silent (nothing read within the
 * timeout while reading, or nothing written within it while the reader is held back by a bound, so a peer that stops
 * reading looks as dead as one that stops sending), and a keep-alive after a quarter of the timeout without writing,
 * so this side never looks silent to the peer.
 */
final class KeepAlive {

    private final Duration idleTimeout;
    private final OutgoingFrames outgoing;
    private final ReadBounds bounds;
    private final FrameInput input;
    private final AtomicBoolean pingQueued = new AtomicBoolean();

    KeepAlive(Duration idleTimeout, OutgoingFrames outgoing, ReadBounds bounds, FrameInput input) {
        this.idleTimeout = idleTimeout;
        this.outgoing = outgoing;
        this.bounds = bounds;
        this.input = input;
    }

    /** Null while the peer is alive (queueing a keep-alive when one is due), else what it stopped doing. */
    String check(long now) {
        long idle = idleTimeout.toNanos();
        long lastWrite = outgoing.lastWriteNanos();
        long silentFor = bounds.paused() ? now - lastWrite : now - input.lastReadNanos();
        if (silentFor > idle) {
            return bounds.paused() ? "reading" : "sending";
        }
        if (now - lastWrite > idle / 4 && pingQueued.compareAndSet(false, true)) {
            CompletableFuture<Void> done = new CompletableFuture<>();
            done.whenComplete((v, e) -> pingQueued.set(false));
            outgoing.enqueue(new OutgoingFrames.Control(done, TcpFrameCodec.encodeEmpty(TcpFrameCodec.PING, 0)));
        }
        return null;
    }
}
