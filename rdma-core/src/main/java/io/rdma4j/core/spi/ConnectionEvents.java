package io.rdma4j.core.spi;

import java.nio.ByteBuffer;

/** What a provider connection reports to the transport. Called from provider threads: implementations never block. */
public interface ConnectionEvents {

    /** A two-sided message arrived (the buffer is the transport's to keep, from {@link #messageBuffer} or not). */
    void onMessage(ByteBuffer message);

    /**
     * The buffer to read a message of {@code size} bytes into, at position 0 with at least {@code size} bytes
     * remaining: the application's where it lent receive memory ({@link io.rdma4j.core.ReceiveBuffers}), else a heap
     * buffer. The provider passes it to {@link #onMessage} once read, or to {@link #messageDropped} if it never will.
     */
    default ByteBuffer messageBuffer(int size) {
        return ByteBuffer.allocate(size);
    }

    /** A buffer from {@link #messageBuffer} whose message will not be delivered (the connection ended meanwhile). */
    default void messageDropped(ByteBuffer buffer) {
    }

    /**
     * The connection is gone: closed locally, by the peer, or failed. {@code cause} is a
     * {@link io.rdma4j.core.RdmaException} describing why. Called once.
     */
    void onClosed(Throwable cause);

    /**
     * Bytes of the peer's two-sided messages that the application has not received yet (each message counted
     * at least {@value #MESSAGE_OVERHEAD} bytes, its cost on the heap). A provider that can stop reading from
     * the peer does so while this exceeds its bound.
     */
    default long unreceivedMessageBytes() {
        return 0;
    }

    /**
     * {@link #unreceivedMessageBytes()} summed over every open connection of the transport: a provider with a memory
     * budget per transport stops reading from the connections that hold the most while this is beyond it.
     */
    default long transportUnreceivedMessageBytes() {
        return unreceivedMessageBytes();
    }

    /** The peer's requests whose replies are not sent yet; a provider that can stop reading does so beyond its bound. */
    default int unansweredRequests() {
        return 0;
    }

    /** The least a queued message counts towards {@link #unreceivedMessageBytes()}. */
    int MESSAGE_OVERHEAD = 1024;
}
