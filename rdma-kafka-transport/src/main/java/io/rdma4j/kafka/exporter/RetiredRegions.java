package io.rdma4j.kafka.exporter;

import io.rdma4j.core.RegisteredRegion;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.ArrayDeque;

/**
 * Regions replaced by a newer registration of the same segment: they stay readable for
 * {@code rdma.exporter.retire.grace.ms}, since a consumer may have read their descriptor just before, then close with
 * their arena.
 */
final class RetiredRegions implements PartitionExport.Retirer {

    private record Retired(RegisteredRegion region, Arena arena, long closeAtNanos) {
    }

    private final Duration grace;
    private final ArrayDeque<Retired> retired = new ArrayDeque<>();

    RetiredRegions(Duration grace) {
        this.grace = grace;
    }

    @Override
    public void retire(RegisteredRegion region, Arena arena) {
        synchronized (retired) {
            retired.add(new Retired(region, arena, System.nanoTime() + grace.toNanos()));
        }
    }

    /** Closes the regions whose grace is over, or every one ({@code all}, when the exporter closes). */
    void closeDue(boolean all) {
        synchronized (retired) {
            while (!retired.isEmpty() && (all || retired.peek().closeAtNanos() - System.nanoTime() <= 0)) {
                Retired r = retired.poll();
                r.region().close();
                r.arena().close();
            }
        }
    }
}
