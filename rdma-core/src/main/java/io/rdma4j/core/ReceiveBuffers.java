package io.rdma4j.core;

import java.nio.ByteBuffer;

/**
 * Memory the application lends a connection for the messages it receives ({@link RdmaConnection#useReceiveBuffers}),
 * so a message is read once, straight into the application's buffer, instead of into rdma4j's heap buffer the
 * application then copies from (a Netty channel reads into buffers of its own allocator this way).
 *
 * <p>A buffer {@link #allocate} returned belongs to rdma4j until it is either handed to the application, as the
 * message {@link RdmaConnection#receive()} completes with (the same object, positioned at the message's first byte),
 * from when on the application owns it and gives it back itself, or handed to {@link #release} when it will never
 * reach the application (the connection ended while the message was being read, or the message broke the protocol).
 * Messages that were already queued when the buffers were lent, and those of a provider that cannot read into them
 * (verbs reassembles a message from its registered receive slots), are rdma4j's own heap buffers, as before: tell
 * them apart by identity. Messages queued when the connection closes stay receivable; an application that will not
 * take them receives until the connection's receive fails, giving back each buffer, so none is left behind.
 *
 * <p>rdma4j counts lent buffers against its per-connection and per-transport inbox bounds as its own, so what an
 * application lends is bounded by them. Both methods are called on rdma4j's reading threads (or the polling thread of
 * a {@link ConnectionPoller}) and must not block.
 */
public interface ReceiveBuffers {

    /**
     * A direct buffer for a message of {@code size} bytes about to be read: position 0 and at least {@code size}
     * bytes remaining. A buffer that is not so fails the connection, naming what was wrong; an exception thrown here
     * makes rdma4j read the message into its own heap buffer.
     */
    ByteBuffer allocate(int size);

    /** Gives back a buffer {@link #allocate} returned whose message will not be delivered. */
    void release(ByteBuffer buffer);
}
