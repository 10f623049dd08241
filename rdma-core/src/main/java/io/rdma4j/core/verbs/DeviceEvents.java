package io.rdma4j.core.verbs;

import io.rdma4j.nativeloader.Poll;
import io.rdma4j.nativeloader.Verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.IntFunction;

/**
 * The device's asynchronous events, on a thread of their own. A queue pair that entered the error state closes its
 * connection at once: on a shared receive queue nothing else tells a side that only answers one-sided operations
 * (no receive of its own is flushed), and its peer would wait for its operation timeout. Errors of the shared
 * receive queue, a CQ, the device or a port are logged.
 */
final class DeviceEvents implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(DeviceEvents.class.getName());
    private static final int POLL_TIMEOUT_MS = 100;

    private final MemorySegment context;
    private final String device;
    /** The connection of a queue pair number, while its queue pair exists ({@link ReceiveCompletions}). */
    private final IntFunction<VerbsConnection> connections;
    private volatile boolean running = true;
    private final Thread thread;

    DeviceEvents(MemorySegment context, String device, IntFunction<VerbsConnection> connections) {
        this.context = context;
        this.device = device;
        this.connections = connections;
        this.thread = Thread.ofPlatform().daemon().name("rdma4j-verbs-device-events").start(this::run);
    }

    private void run() {
        try (Arena a = Arena.ofConfined()) {
            Poll poll = Poll.forReading(Verbs.asyncEventFd(context), a);
            MemorySegment scratch = Verbs.asyncEventScratch(a);
            while (running) {
                if (poll.awaitReadable(POLL_TIMEOUT_MS)) {
                    handle(Verbs.nextAsyncEvent(context, scratch));
                }
            }
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.ERROR, "rdma4j verbs device event thread of " + device + " failed: queue pairs"
                    + " that fail are noticed only by their own completions from now on", e);
        }
    }

    private void handle(Verbs.AsyncEvent event) {
        if (event.queuePairFailed()) {
            VerbsConnection c = connections.apply(event.queuePairNumber());
            if (c != null) {
                c.queuePairFailed(event.name());
            }
        } else if (event.queuePairNumber() < 0) {
            LOG.log(System.Logger.Level.WARNING, "rdma4j verbs: " + device + " reported " + event.name());
        }
    }

    /** Stops the thread; before the device is closed. */
    @Override
    public void close() {
        running = false;
        VerbsTransport.join(thread);
    }
}
