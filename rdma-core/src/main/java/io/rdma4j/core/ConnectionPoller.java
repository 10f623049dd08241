package io.rdma4j.core;

import java.io.IOException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.util.function.IntConsumer;

/**
 * Lets one thread, an event loop's, read its connections itself: the loop waits in {@link #poll} and reads the
 * connections {@link #attach attached} to it as their input arrives, so a message reaches the loop without a thread
 * of rdma4j's reading it first and waking the loop (on a virtual machine each wake-up costs more than a loopback
 * round trip). What the poller reads completes operations as before: on the executor given to
 * {@link RdmaConnection#receive(java.util.concurrent.Executor)} or {@code send(ByteBuffer, Executor)}, else on
 * rdma4j's completion threads; request handlers never run on the polling thread.
 *
 * <p>Where the provider cannot be read this way (verbs, the tcp provider over TLS) {@link #attach} declines and the
 * connection's completions come from rdma4j's threads; {@link #poll} still waits until {@link #wakeup}, so a loop
 * uses a poller whatever the provider. A frame that cannot be read without waiting (one whose bytes have not all
 * arrived, or one the connection's bounds hold back) is finished by one of rdma4j's threads, which gives reading back
 * afterwards: a peer that stalls never stalls the polling thread.
 *
 * <p>One thread polls, and attaches, detaches and closes; {@link #wakeup} is for any thread.
 */
public interface ConnectionPoller extends AutoCloseable {

    /** Reads {@code connection} on the polling thread from its next frame on; false when its provider cannot. */
    boolean attach(RdmaConnection connection);

    /** Gives {@code connection}'s reading back to rdma4j's threads; nothing if it is not attached. */
    void detach(RdmaConnection connection);

    /**
     * Watches a plain socket of the application's ({@code channel}, non-blocking) as well, so one loop serves rdma4j
     * connections and plain sockets (a Netty channel whose peer does not run rdma4j): {@code ready} runs within
     * {@link #poll}, on the polling thread, with the ready operations of {@code ops}. The polling thread changes the
     * interest through the returned key, and cancels it to stop watching.
     */
    SelectionKey watch(SelectableChannel channel, int ops, IntConsumer ready) throws IOException;

    /**
     * Waits up to {@code timeoutNanos} (0: not at all) for input on the attached connections, the watched sockets or
     * {@link #wakeup}, and reads what has arrived.
     */
    void poll(long timeoutNanos);

    /** Ends the current or the next {@link #poll} at once; from any thread. */
    void wakeup();

    /** Detaches every connection. */
    @Override
    void close();
}
