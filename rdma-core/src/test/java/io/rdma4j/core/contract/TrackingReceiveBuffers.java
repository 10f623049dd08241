package io.rdma4j.core.contract;

import io.rdma4j.core.ReceiveBuffers;

import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/** Lends direct buffers and tracks each, by identity, until it comes back: received, or released by rdma4j. */
public final class TrackingReceiveBuffers implements ReceiveBuffers {

    /** Lent and not back yet. */
    public final Set<ByteBuffer> lent = Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));
    /** What rdma4j gave back through {@link #release}. */
    public final List<ByteBuffer> released = new CopyOnWriteArrayList<>();

    @Override
    public ByteBuffer allocate(int size) {
        ByteBuffer b = ByteBuffer.allocateDirect(size);
        lent.add(b);
        return b;
    }

    @Override
    public void release(ByteBuffer buffer) {
        assertThat(lent.remove(buffer)).as("only lent buffers come back, once").isTrue();
        released.add(buffer);
    }

    /** A received message: true if it was one of the lent buffers, which is then back. */
    public boolean takeBack(ByteBuffer received) {
        return lent.remove(received);
    }
}
