package io.rdma4j.core.tcp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.Optional;

/**
 * The byte stream a connection's frames travel on: the socket itself, or TLS over it. One reader thread and
 * one writer thread may use it at once; where {@link #writesWithoutBlocking} says so, there is no writer thread:
 * any thread writes without blocking, under the connection's write lock, and the reader thread, while it waits
 * for the socket, also waits for room to write what {@link Output#awaitsRoom awaits room}.
 */
interface FrameChannel {

    /** What the connection has to write, as the reader thread sees it while it waits. */
    interface Output {
        /**
         * Whether frames wait for the socket to have room: only then does the reader wait for room too. Frames that
         * another thread is writing right now do not count, or the reader would wake at once to find the socket
         * writable, as it nearly always is, and nothing to read.
         */
        boolean awaitsRoom();

        /** Writes what the socket takes now, without blocking. */
        void flush();

        /** The socket has room again: writes what it takes now, without blocking. */
        void socketWritable();
    }

    /** Reads at least one byte into {@code dst}, blocking; -1 at the end of the stream. */
    int read(ByteBuffer dst) throws IOException;

    /**
     * Reads at least one byte into {@code dst}, blocking, and what arrived beyond it into {@code then} where the
     * channel can do so in the same call; -1 at the end of the stream.
     */
    default long read(ByteBuffer dst, ByteBuffer then) throws IOException {
        return read(dst);
    }

    /** Reads what has arrived into {@code dst} without waiting (a plain socket once frames flow); -1 at the end. */
    default long tryRead(ByteBuffer dst) throws IOException {
        throw new UnsupportedOperationException("this channel cannot read without blocking");
    }

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

    /** Called before the reader thread starts, where {@link #writesWithoutBlocking}: what it writes while waiting. */
    default void writeWhileWaiting(Output output) {
    }

    /**
     * The reader thread, paused at a bound, waits up to {@code millis} for room to write what is pending (and
     * writes it), without reading. Where the writer thread writes, it has nothing to do here.
     */
    default void awaitWritable(long millis) throws IOException {
    }

    /** Wakes the reader thread waiting on the socket: it was closed, or there is now something to write. */
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
