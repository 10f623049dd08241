package io.rdma4j.netty;

import io.netty.buffer.ByteBuf;

import java.nio.ByteBuffer;

/**
 * A message the channel received: {@code bytes}, and where rdma4j read it into the channel's memory, the
 * {@code ByteBuf} whose readable bytes they are (null for a message in rdma4j's own heap buffer, which the reader
 * copies). The channel owns {@code lent} and releases it once it has handed all of it to the pipeline or dropped it.
 */
record ReceivedMessage(ByteBuffer bytes, ByteBuf lent) {

    /** Gives back the lent memory; for a message the channel will not read. */
    void release() {
        if (lent != null) {
            lent.release();
        }
    }
}
