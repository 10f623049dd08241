package io.rdma4j.spring.boot;

import io.rdma4j.core.RegionDescriptor;
import io.rdma4j.core.RegisteredRegion;

import java.lang.foreign.Arena;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A region published under a name by {@link RdmaTemplate}. Closing it withdraws the name and
 * deregisters the memory (waiting until no peer's read still touches it), then frees memory the
 * template mapped itself (published files).
 */
public final class PublishedRegion implements AutoCloseable {

    private final String name;
    private final RegisteredRegion region;
    private final Arena ownedMemory;
    private final Runnable onClose;
    private final AtomicBoolean closed = new AtomicBoolean();

    PublishedRegion(String name, RegisteredRegion region, Arena ownedMemory, Runnable onClose) {
        this.name = name;
        this.region = region;
        this.ownedMemory = ownedMemory;
        this.onClose = onClose;
    }

    public String name() {
        return name;
    }

    public RegionDescriptor descriptor() {
        return region.descriptor();
    }

    public long byteSize() {
        return region.segment().byteSize();
    }

    /** False only for the placeholder that reserves a name while its memory is being registered. */
    boolean hasRegion() {
        return region != null;
    }

    public boolean isOpen() {
        return !closed.get();
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        onClose.run();
        try {
            if (region != null) {
                region.close();
            }
        } finally {
            if (ownedMemory != null) {
                ownedMemory.close();
            }
        }
    }

    @Override
    public String toString() {
        return "PublishedRegion[" + name + ", " + byteSize() + " bytes]";
    }
}
