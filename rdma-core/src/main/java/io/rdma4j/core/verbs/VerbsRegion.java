package io.rdma4j.core.verbs;

import io.rdma4j.core.spi.ProviderRegion;
import io.rdma4j.nativeloader.Verbs;

import java.util.concurrent.atomic.AtomicBoolean;

/** A registered memory region: its rkey is the descriptor key. Closing deregisters it once. */
final class VerbsRegion implements ProviderRegion {

    private static final System.Logger LOG = System.getLogger(VerbsRegion.class.getName());

    private final Verbs.MemoryRegion region;
    private final AtomicBoolean closed = new AtomicBoolean();

    VerbsRegion(Verbs.MemoryRegion region) {
        this.region = region;
    }

    @Override
    public long key() {
        return Integer.toUnsignedLong(region.rkey());
    }

    @Override
    public long localKey() {
        return Integer.toUnsignedLong(region.lkey());
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            int rc = Verbs.deregisterMemory(region);
            if (rc != 0) {
                LOG.log(System.Logger.Level.WARNING, "ibv_dereg_mr failed: " + rc);
            }
        }
    }
}
