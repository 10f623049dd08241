package io.rdma4j.netty;

import io.netty.channel.IoEvent;
import io.rdma4j.core.RdmaConnection;

/** What rdma4j's threads tell a channel, on its event loop. */
sealed interface RdmaEvent extends IoEvent {

    /** Gives back what the event holds when no channel will take it. */
    default void discard() {
    }

    /** A {@code receive()} completed: the message, or why the connection ended. */
    record Received(ReceivedMessage message, Throwable failure) implements RdmaEvent {
        @Override
        public void discard() {
            if (message != null) {
                message.release();
            }
        }
    }

    /** The send window has room again after the loop found it full. */
    record Writable() implements RdmaEvent {
    }

    /** A send failed: the connection is gone. */
    record SendFailed(Throwable failure) implements RdmaEvent {
    }

    /** A connect completed. */
    record Connected(RdmaConnection connection, Throwable failure) implements RdmaEvent {
        @Override
        public void discard() {
            if (connection != null) {
                connection.close();
            }
        }
    }

    /** A listener accepted a connection. */
    record Accepted(RdmaConnection connection) implements RdmaEvent {
        @Override
        public void discard() {
            connection.close();
        }
    }

    /**
     * A task of rdma4j's, run on the loop: it completes a receive (whose callback then posts {@link Received}) or a
     * send.
     */
    record Run(Runnable task) implements RdmaEvent {
        @Override
        public void discard() {
            task.run();
        }
    }

    /** Read what is queued (posted by the channel itself, so the read does not run inside the caller's stack). */
    record ReadNow() implements RdmaEvent {
    }
}
