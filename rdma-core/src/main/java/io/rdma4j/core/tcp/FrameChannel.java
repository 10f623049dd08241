package io.rdma4j.core.tcp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.Optional;

/**
 * The byte stream a connection's frames travel on: the socket itself, or TLS over it. One reader thread and
 * one writer thread may use it at once; where {@link #writesWithoutBlocking} says so, any thread may also try a
 * write that does not block, under the connection's write lock.
 */
interface FrameChannel {

    /** Reads at least one byte into {@code dst}, blocking; -1 at the end of the stream. */
    int read(ByteBuffer dst) throws IOException;

    /** Writes some of {@code srcs}, blocking; returns the bytes taken. */
    long write(ByteBuffer[] srcs) throws IOException;

    /** Whether {@link #tryWrite} works: true once a plain socket carries frames. */
    default boolean writesWithoutBlocking() {
        return false;
    }

    /** Writes what the socket takes now, without blocking; returns the bytes taken, perhaps none. */
    default long tryWrite(ByteBuffer[] srcs) throws IOException {
        throw new UnsupportedOperationException("this channel cannot write without blocking");
    }

    /** Called once the handshake is done, before the connection's threads use the channel. */
    default void startFrames() throws IOException {
    }

    /** Wakes the threads waiting on the socket, after it was closed, so they see it closed. */
    default void wakeUp() {
    }

    /** Releases what the channel holds besides the socket; once no thread uses it any more. */
    default void release() {
    }

    /** Bytes that identify this channel's security session, bound into the shared-secret proofs; empty for plain tcp. */
    byte[] binding();

    /** Who the peer proved to be on this channel (a verified certificate's subject); empty when nothing names it. */
    default Optional<String> peerPrincipal() {
        return Optional.empty();
    }

    /** The socket as is. */
    static FrameChannel plain(SocketChannel socket) {
        return new PlainChannel(socket);
    }
}
