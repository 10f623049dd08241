package io.rdma4j.nativeloader.discovery;

import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * This host's sysfs snapshot and soft-RDMA modules, shared by every discovery in the process for
 * {@value #REUSE_SECONDS} seconds after a scan. A scan reads each GID table entry, a file each (rxe has 1024 per port):
 * milliseconds on a host, half a second on an emulated CPU. Opening a transport, each provider's probe and the
 * doctor's report all discover, often back to back. Callers that arrive during a scan wait for it rather than scan too;
 * a device that comes, goes or changes state is seen by the discoveries that start {@value #REUSE_SECONDS} s later.
 */
final class RecentHostScan {

    static final int REUSE_SECONDS = 2;
    private static final long REUSE_NANOS = TimeUnit.SECONDS.toNanos(REUSE_SECONDS);

    /** One scan, and when it ended. */
    record Scan(SysfsScanner.Snapshot snapshot, KernelModules kernel, long endedAtNanos) {
    }

    private final Supplier<SysfsScanner.Snapshot> sysfs;
    private final Supplier<KernelModules> modules;
    private final LongSupplier nanoClock;
    private Scan last;

    RecentHostScan(Supplier<SysfsScanner.Snapshot> sysfs, Supplier<KernelModules> modules, LongSupplier nanoClock) {
        this.sysfs = Objects.requireNonNull(sysfs, "sysfs");
        this.modules = Objects.requireNonNull(modules, "modules");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
    }

    /** The last scan while it is recent, else a new one. */
    synchronized Scan get() {
        if (last == null || nanoClock.getAsLong() - last.endedAtNanos() >= REUSE_NANOS) {
            SysfsScanner.Snapshot snapshot = sysfs.get();
            KernelModules kernel = modules.get();
            last = new Scan(snapshot, kernel, nanoClock.getAsLong());
        }
        return last;
    }
}
