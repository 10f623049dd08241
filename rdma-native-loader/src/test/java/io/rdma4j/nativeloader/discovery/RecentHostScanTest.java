package io.rdma4j.nativeloader.discovery;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

class RecentHostScanTest {

    private final AtomicLong now = new AtomicLong(1_000);
    private final AtomicInteger sysfsScans = new AtomicInteger();
    private final AtomicInteger moduleScans = new AtomicInteger();
    private final RecentHostScan scans = new RecentHostScan(
            () -> {
                sysfsScans.incrementAndGet();
                return Fixtures.scan("roce-host");
            },
            () -> {
                moduleScans.incrementAndGet();
                return new KernelModules(Optional.of("6.1.0"), true, java.util.Set.of(KernelModules.RXE));
            },
            now::get);

    @Test
    void discoveriesWithinTheWindowShareOneScan() {
        RecentHostScan.Scan first = scans.get();
        now.addAndGet(TimeUnit.SECONDS.toNanos(RecentHostScan.REUSE_SECONDS) - 1);
        assertThat(scans.get()).isSameAs(first);
        assertThat(sysfsScans).hasValue(1);
        assertThat(moduleScans).hasValue(1);
    }

    @Test
    void aScanOlderThanTheWindowIsTakenAgain() {
        RecentHostScan.Scan first = scans.get();
        now.addAndGet(TimeUnit.SECONDS.toNanos(RecentHostScan.REUSE_SECONDS));
        RecentHostScan.Scan second = scans.get();
        assertThat(second).isNotSameAs(first);
        assertThat(second.endedAtNanos()).isEqualTo(now.get());
        assertThat(sysfsScans).hasValue(2);
        assertThat(moduleScans).hasValue(2);
        assertThat(scans.get()).isSameAs(second);
    }

    @Test
    void theWindowCountsFromTheEndOfTheScan() {
        RecentHostScan slow = new RecentHostScan(() -> {
            now.addAndGet(TimeUnit.SECONDS.toNanos(1)); // a scan that takes a second, as rxe's table does on an emulated CPU
            return new SysfsScanner.Snapshot(java.nio.file.Path.of("/"), false, List.of(), Map.of());
        }, KernelModules::unknown, now::get);
        RecentHostScan.Scan first = slow.get();
        now.addAndGet(TimeUnit.SECONDS.toNanos(RecentHostScan.REUSE_SECONDS) - 1);
        assertThat(slow.get()).isSameAs(first);
    }

    @Test
    void concurrentDiscoveriesWaitForOneScan() throws Exception {
        List<Thread> threads = new java.util.ArrayList<>();
        java.util.Set<RecentHostScan.Scan> seen = java.util.concurrent.ConcurrentHashMap.newKeySet();
        for (int i = 0; i < 8; i++) {
            threads.add(Thread.ofPlatform().start(() -> seen.add(scans.get())));
        }
        for (Thread t : threads) {
            t.join();
        }
        assertThat(seen).hasSize(1);
        assertThat(sysfsScans).hasValue(1);
    }
}
