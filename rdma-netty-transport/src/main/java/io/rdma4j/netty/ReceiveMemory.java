package io.rdma4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.rdma4j.core.ReceiveBuffers;

import java.nio.ByteBuffer;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Buffers of the channel's allocator that its connection reads messages into, so a message goes from the socket to
 * the pipeline without a copy: rdma4j reads it into the {@code ByteBuf}'s memory, and the pipeline gets slices of
 * that {@code ByteBuf}. Remembers which {@code ByteBuf} each lent {@code ByteBuffer} belongs to until rdma4j hands
 * the buffer back, as a received message or as one it dropped.
 */
final class ReceiveMemory implements ReceiveBuffers {

    private final Supplier<ByteBufAllocator> allocator;
    /** Guarded by itself: rdma4j's reading threads lend and release, the loop takes. */
    private final Map<ByteBuffer, ByteBuf> lent = new IdentityHashMap<>();

    ReceiveMemory(Supplier<ByteBufAllocator> allocator) {
        this.allocator = allocator;
    }

    @Override
    public ByteBuffer allocate(int size) {
        ByteBuf buf = allocator.get().directBuffer(size, size);
        ByteBuffer memory = buf.nioBuffer(0, size);
        synchronized (lent) {
            lent.put(memory, buf);
        }
        return memory;
    }

    @Override
    public void release(ByteBuffer buffer) {
        ByteBuf buf = take(buffer);
        if (buf != null) {
            buf.release();
        }
    }

    /** A message {@code receive()} completed with, and the {@code ByteBuf} holding it if it is one of ours. */
    ReceivedMessage received(ByteBuffer message) {
        ByteBuf buf = take(message);
        return new ReceivedMessage(message, buf == null ? null : buf.setIndex(message.position(), message.limit()));
    }

    private ByteBuf take(ByteBuffer buffer) {
        synchronized (lent) {
            return lent.remove(buffer);
        }
    }
}
