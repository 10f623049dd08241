package io.rdma4j.core.verbs;

import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ConnectionEvents;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * What a connection tells the transport facade: its messages, kept until the facade has started listening,
 * and its close, reported exactly once. Guarded by the connection's lock; the facade is called without it.
 */
final class FacadeEvents {

    private final ReentrantLock lock;
    private ConnectionEvents events;
    private final List<ByteBuffer> early = new ArrayList<>();
    private boolean closedReported;

    FacadeEvents(ReentrantLock lock) {
        this.lock = lock;
    }

    /**
     * The facade starts listening: it gets the messages that came before, in order and before any that come after,
     * and the close when {@code closedAlready} (asked under the lock) says the connection is closed already (null: it
     * is not). Messages that arrive while the earlier ones are delivered queue behind them: the facade is only named
     * to {@link #deliverTo} once nothing is left queued.
     */
    void start(ConnectionEvents events, Supplier<ClosedAlready> closedAlready) {
        while (true) {
            List<ByteBuffer> queued = null;
            ClosedAlready closed = null;
            lock.lock();
            try {
                if (early.isEmpty()) {
                    this.events = events;
                    closed = closedAlready.get();
                    if (closed != null && !closedReported) {
                        closedReported = true;
                    } else {
                        closed = null;
                    }
                } else {
                    queued = new ArrayList<>(early);
                    early.clear();
                }
            } finally {
                lock.unlock();
            }
            if (queued == null) {
                if (closed != null) {
                    events.onClosed(closed.cause());
                }
                return;
            }
            queued.forEach(events::onMessage);
        }
    }

    /** The connection is closed, and why (the cause may be null). */
    record ClosedAlready(RdmaException cause) {
    }

    /**
     * Under the lock: where to deliver {@code message} once the lock is released, or null when it is kept for
     * {@link #start}, or dropped because the facade has heard of the close (nothing comes after it).
     */
    ConnectionEvents deliverTo(ByteBuffer message) {
        if (closedReported) {
            return null;
        }
        if (events == null) {
            early.add(message);
        }
        return events;
    }

    /** Tells the facade once that the connection is closed, with {@code cause}. */
    void reportClosed(Supplier<RdmaException> cause) {
        ConnectionEvents e;
        lock.lock();
        try {
            e = closedReported ? null : events;
            if (e != null) {
                closedReported = true;
            }
        } finally {
            lock.unlock();
        }
        if (e != null) {
            e.onClosed(cause.get());
        }
    }
}
