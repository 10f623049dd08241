package io.rdma4j.core.tcp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.Optional;

/**
 * The byte stream a connection's frames travel on: the socket itself, or TLS over it. One reader thread and
 * one writer thread may use it at once.
 */
interface FrameChannel {

    /** Reads at least one byte into {@code dst}, blocking; -1 at the end of the stream. */
    int read(ByteBuffer dst) throws IOException;

    /** Writes some of {@code srcs}, blocking; returns the bytes taken. */
    long write(ByteBuffer[] srcs) throws IOException;

    /** Bytes that identify this channel's security session, bound into the shared-secret proofs; empty for plain tcp. */
    byte[] binding();

    /** Who the peer proved to be on this channel (a verified certificate's subject); empty when nothing names it. */
    default Optional<String> peerPrincipal() {
        return Optional.empty();
    }

    /** The socket as is. */
    static FrameChannel plain(SocketChannel socket) {
        return new FrameChannel() {
            @Override
            public int read(ByteBuffer dst) throws IOException {
                return socket.read(dst);
            }

            @Override
            public long write(ByteBuffer[] srcs) throws IOException {
                return socket.write(srcs);
            }

            @Override
            public byte[] binding() {
                return new byte[0];
            }
        };
    }
}
