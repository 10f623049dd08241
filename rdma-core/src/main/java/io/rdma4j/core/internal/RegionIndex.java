package io.rdma4j.core.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/** Finds the live registration that contains a local segment (registrations may overlap). */
final class RegionIndex {

    private final TreeMap<Long, List<DefaultRegion>> byStart = new TreeMap<>();
    private final ReadWriteLock lock = new ReentrantReadWriteLock();
    private long longest;
    private int size;

    void add(DefaultRegion region) {
        lock.writeLock().lock();
        try {
            byStart.computeIfAbsent(region.start(), k -> new ArrayList<>(1)).add(region);
            longest = Math.max(longest, region.segment().byteSize());
            size++;
        } finally {
            lock.writeLock().unlock();
        }
    }

    void remove(DefaultRegion region) {
        lock.writeLock().lock();
        try {
            List<DefaultRegion> list = byStart.get(region.start());
            if (list != null && list.remove(region)) {
                size--;
                if (list.isEmpty()) {
                    byStart.remove(region.start());
                }
            }
        } finally {
            lock.writeLock().unlock();
        }
    }

    /** A live region containing {@code segment} that grants what {@code usable} asks, or null. */
    DefaultRegion find(MemorySegment segment, java.util.function.Predicate<DefaultRegion> usable) {
        long address = segment.address();
        long end = address + segment.byteSize();
        lock.readLock().lock();
        try {
            // Only regions starting at most `longest` bytes before the segment's end can contain it.
            for (Map.Entry<Long, List<DefaultRegion>> e : byStart.headMap(address, true).descendingMap().entrySet()) {
                if (e.getKey() + longest < end) {
                    break;
                }
                for (DefaultRegion r : e.getValue()) {
                    if (r.isOpen() && r.contains(segment) && usable.test(r)) {
                        return r;
                    }
                }
            }
            return null;
        } finally {
            lock.readLock().unlock();
        }
    }

    List<DefaultRegion> all() {
        lock.readLock().lock();
        try {
            List<DefaultRegion> result = new ArrayList<>(size);
            byStart.values().forEach(result::addAll);
            return result;
        } finally {
            lock.readLock().unlock();
        }
    }

    int size() {
        lock.readLock().lock();
        try {
            return size;
        } finally {
            lock.readLock().unlock();
        }
    }
}
