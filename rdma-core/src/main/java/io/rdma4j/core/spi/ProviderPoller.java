package io.rdma4j.core.spi;

import java.io.IOException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.util.function.IntConsumer;

/**
 * A provider's side of {@link io.rdma4j.core.ConnectionPoller}: one thread waits in {@link #poll} and reads the
 * attached connections as their input arrives, without blocking on any of them.
 */
public interface ProviderPoller extends AutoCloseable {

    /** Reads {@code connection} on the polling thread from its next frame on; false when it cannot be. */
    boolean attach(ProviderConnection connection);

    /** Gives {@code connection}'s reading back to the provider's threads; nothing if it is not attached. */
    void detach(ProviderConnection connection);

    /** Watches an application's plain socket too; see {@link io.rdma4j.core.ConnectionPoller#watch}. */
    SelectionKey watch(SelectableChannel channel, int ops, IntConsumer ready) throws IOException;

    /** Waits up to {@code timeoutNanos} (0: not at all) for input or {@link #wakeup}, and reads what arrived. */
    void poll(long timeoutNanos) throws IOException;

    /** Ends the current or the next {@link #poll} at once; from any thread. */
    void wakeup();

    /** Detaches every connection and releases the poller. */
    @Override
    void close();
}
