package io.rdma4j.spark;

import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Streams a block straight out of native memory (a pooled registered buffer or a mapped file) without
 * copying it onto the heap first; closing it releases its share of the buffer.
 */
final class SegmentInputStream extends InputStream {

    private final ByteBuffer bytes;
    private final SharedBuffer owner;
    private final AtomicBoolean closed = new AtomicBoolean();

    SegmentInputStream(ByteBuffer bytes, SharedBuffer owner) {
        this.bytes = bytes;
        this.owner = owner;
    }

    @Override
    public int read() {
        return bytes.hasRemaining() ? bytes.get() & 0xff : -1;
    }

    @Override
    public int read(byte[] b, int off, int len) {
        if (len == 0) {
            return 0;
        }
        if (!bytes.hasRemaining()) {
            return -1;
        }
        int n = Math.min(len, bytes.remaining());
        bytes.get(b, off, n);
        return n;
    }

    @Override
    public long skip(long n) {
        int k = (int) Math.max(0, Math.min(n, bytes.remaining()));
        bytes.position(bytes.position() + k);
        return k;
    }

    @Override
    public int available() {
        return bytes.remaining();
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true) && owner != null) {
            owner.release();
        }
    }
}
