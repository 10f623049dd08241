package io.rdma4j.netty;

import io.netty.channel.ConnectTimeoutException;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaTimeoutException;

import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketAddress;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** rdma4j's failures as the exceptions Netty's channels raise for the same events on a socket. */
final class RdmaErrors {

    private RdmaErrors() {
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    /** The connection ended without the peer's end of stream: it closed abruptly, failed or timed out. */
    static IOException reset(Throwable failure) {
        Throwable cause = unwrap(failure);
        String what = cause instanceof RdmaTimeoutException ? "connection timed out" : "connection reset by peer";
        return new IOException(what + " (rdma4j: " + cause.getMessage() + ")", cause);
    }

    /** A send failed: the connection is closed. */
    static IOException sendFailed(Throwable failure) {
        Throwable cause = unwrap(failure);
        return new IOException("connection closed: " + cause.getMessage(), cause);
    }

    /**
     * A connect failed: a timeout as Netty's {@link ConnectTimeoutException}, a peer that could not be reached as
     * {@link ConnectException}; rdma4j's other failures (authentication, a provider that cannot run) as they are.
     */
    static Throwable connectFailed(Throwable failure, SocketAddress remote) {
        Throwable cause = unwrap(failure);
        Exception e;
        if (cause instanceof RdmaTimeoutException) {
            e = new ConnectTimeoutException("connection timed out: " + remote + " (rdma4j: " + cause.getMessage() + ")");
        } else if (cause instanceof ConnectionClosedException) {
            e = new ConnectException("connection refused: " + remote + " (rdma4j: " + cause.getMessage() + ")");
        } else {
            return cause;
        }
        e.initCause(cause);
        return e;
    }
}
