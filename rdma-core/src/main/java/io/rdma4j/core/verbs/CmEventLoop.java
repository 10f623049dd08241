package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Poll;
import io.rdma4j.nativeloader.RdmaCm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * The thread that takes rdma_cm events off the transport's event channel and hands each to the handler of
 * its cm id (a connect request: to its listener's). A connect request nobody listens for is rejected.
 */
final class CmEventLoop implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(CmEventLoop.class.getName());
    /** How often the thread looks whether it should stop: rdma_get_cm_event itself blocks without a timeout. */
    private static final int POLL_TIMEOUT_MS = 50;

    private final MemorySegment eventChannel;
    private final Map<Long, Consumer<RdmaCm.Event>> handlers = new ConcurrentHashMap<>();
    private volatile boolean running = true;
    private final Thread thread;

    CmEventLoop(MemorySegment eventChannel) {
        this.eventChannel = eventChannel;
        this.thread = Thread.ofPlatform().daemon().name("rdma4j-verbs-cm").start(this::run);
    }

    /** Events of {@code id} go to {@code handler}, on this loop's thread, until {@link #forget}. */
    void on(MemorySegment id, Consumer<RdmaCm.Event> handler) {
        handlers.put(id.address(), handler);
    }

    void forget(MemorySegment id) {
        handlers.remove(id.address());
    }

    private void run() {
        try (Arena a = Arena.ofConfined()) {
            Poll poll = Poll.forReading(RdmaCm.eventChannelFd(eventChannel), a);
            while (running) {
                if (!poll.awaitReadable(POLL_TIMEOUT_MS)) {
                    continue;
                }
                RdmaCm.Event e = RdmaCm.nextEvent(eventChannel);
                if (e != null) {
                    dispatch(e);
                }
            }
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.ERROR, "rdma4j verbs CM event thread failed", e);
        }
    }

    private void dispatch(RdmaCm.Event e) {
        boolean request = e.type() == RdmaCm.CONNECT_REQUEST;
        Consumer<RdmaCm.Event> handler = handlers.get(request ? e.listenId() : e.id());
        if (handler == null) {
            if (request) {
                RdmaCm.reject(e.idHandle());
                RdmaCm.destroyId(e.idHandle());
            }
            return;
        }
        try {
            handler.accept(e);
        } catch (RuntimeException ex) {
            LOG.log(System.Logger.Level.WARNING, "handling " + e.describe() + " failed", ex);
        }
    }

    boolean isAlive() {
        return thread.isAlive();
    }

    /** Stops the thread (within {@link #POLL_TIMEOUT_MS}) and waits for it. */
    @Override
    public void close() {
        running = false;
        VerbsTransport.join(thread);
    }
}
