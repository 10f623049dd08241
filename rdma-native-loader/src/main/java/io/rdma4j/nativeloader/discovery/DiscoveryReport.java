package io.rdma4j.nativeloader.discovery;

import io.rdma4j.nativeloader.MemlockLimit;
import io.rdma4j.nativeloader.discovery.SelectionResult.NoUsableDevice;
import io.rdma4j.nativeloader.discovery.SelectionResult.Selection;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Everything discovery knows about this host, with concrete advice, printable as text (like
 * {@code ibv_devinfo} plus the fixes users usually need). Immutable; a doctor command can print
 * {@link #toText()} and add its own sections (e.g. the provider choice) using the accessors.
 *
 * @param snapshot  what sysfs showed
 * @param options   the overrides the selection used
 * @param selection the automatic choice, or why there is none
 * @param memlock   RLIMIT_MEMLOCK, when readable
 * @param natives   what libibverbs / librdmacm say, when probed
 * @param kernel    which soft-RDMA modules the running kernel has
 * @param advice    concrete fixes, most important first
 */
public record DiscoveryReport(SysfsScanner.Snapshot snapshot, DiscoveryOptions options, SelectionResult selection,
                              Optional<MemlockLimit> memlock, Optional<NativeStatus> natives, KernelModules kernel,
                              List<String> advice) {

    public DiscoveryReport {
        advice = List.copyOf(advice);
    }

    private static final RecentHostScan HOST = new RecentHostScan(() -> SysfsScanner.host().scan(),
            () -> KernelModules.scan(Path.of("/")), System::nanoTime);

    /**
     * Scans the real host ({@code /}) and the kernel's soft-RDMA modules (or takes the scan of the last
     * {@value RecentHostScan#REUSE_SECONDS} s: {@link RecentHostScan}), probes the native libraries and reads this
     * process's memlock limit.
     */
    public static DiscoveryReport forThisHost(DiscoveryOptions options) {
        RecentHostScan.Scan host = HOST.get();
        return create(host.snapshot(), options, MemlockLimit.current(), Optional.of(NativeStatus.probe()), host.kernel());
    }

    /** Builds a report from given inputs, the kernel's modules unknown. */
    public static DiscoveryReport create(SysfsScanner.Snapshot snapshot, DiscoveryOptions options,
                                         Optional<MemlockLimit> memlock, Optional<NativeStatus> natives) {
        return create(snapshot, options, memlock, natives, KernelModules.unknown());
    }

    /** Builds a report from given inputs (tests pass fixture snapshots, limits and modules). */
    public static DiscoveryReport create(SysfsScanner.Snapshot snapshot, DiscoveryOptions options,
                                         Optional<MemlockLimit> memlock, Optional<NativeStatus> natives,
                                         KernelModules kernel) {
        SelectionResult selection = DeviceSelector.select(snapshot, options);
        return new DiscoveryReport(snapshot, options, selection, memlock, natives, kernel,
                advise(snapshot, options, selection, memlock, natives, kernel));
    }

    public Optional<Selection> chosen() {
        return selection instanceof Selection s ? Optional.of(s) : Optional.empty();
    }

    private static List<String> advise(SysfsScanner.Snapshot snapshot, DiscoveryOptions options, SelectionResult selection,
                                       Optional<MemlockLimit> memlock, Optional<NativeStatus> natives,
                                       KernelModules kernel) {
        List<String> advice = new ArrayList<>();
        natives.flatMap(NativeStatus::libraryProblem).ifPresent(advice::add);
        String netdev = options.interfaceName().orElse("eth0");
        // Soft-RoCE needs rdma_rxe: where the kernel has none, modprobe cannot help, the lab's guest kernel can.
        String noRxe = "this kernel (" + kernel.release().orElse("?") + ") has no " + KernelModules.RXE + " module"
                + (kernel.moduleDir() ? "" : " (no /lib/modules/" + kernel.release().orElse("?") + ")")
                + ", so Soft-RoCE cannot run here: rdma4j runs on its tcp provider; to try the verbs provider without"
                + " an RDMA NIC, use the soft-RDMA lab (a QEMU guest with Soft-RoCE and soft-iWARP):"
                + " `it/lab/rdma-lab.sh setup` as root, see it/lab/README.md";
        if (!snapshot.infinibandClassPresent()) {
            advice.add(kernel.lacks(KernelModules.RXE)
                    ? "no /" + SysfsScanner.CLASS_PATH + " (no RDMA driver loaded); " + noRxe
                    : "no /" + SysfsScanner.CLASS_PATH + ": load a driver or use Soft-RoCE: `modprobe rdma_rxe`"
                    + " then `rdma link add rxe0 type rxe netdev " + netdev + "`");
        } else if (snapshot.devices().isEmpty()) {
            advice.add(kernel.lacks(KernelModules.RXE)
                    ? "no RDMA devices: load the NIC's RDMA driver (mlx5_ib, irdma, ...); " + noRxe
                    : "no RDMA devices: load the NIC's RDMA driver (mlx5_ib, irdma, ...) or add Soft-RoCE: "
                    + "`rdma link add rxe0 type rxe netdev " + netdev + "`");
        }
        for (RdmaDevice d : snapshot.devices()) {
            for (RdmaPort p : d.ports()) {
                String where = d.name() + " port " + p.number();
                String dev = d.netdevs().isEmpty() ? "<netdev>" : d.netdevs().getFirst();
                if (p.state() == PortState.DOWN) {
                    advice.add(where + " is DOWN (physical state " + p.physState() + "): check the cable / switch port, "
                            + "or `ip link set " + dev + " up`");
                } else if (p.state() == PortState.INIT && p.linkLayer() == LinkLayer.INFINIBAND) {
                    advice.add(where + " is INIT: no subnet manager configured the fabric; start one "
                            + "(`systemctl start opensm`) on a host of the fabric or enable it on the switch");
                } else if (p.active() && p.linkLayer() == LinkLayer.ETHERNET && d.nodeType() != NodeType.RNIC
                        && p.gids().stream().noneMatch(g -> g.ipv4().isPresent() || (!g.isLinkLocal()))) {
                    advice.add(where + " has only link-local GIDs: assign an IP address to " + dev
                            + " (`ip addr add <ip>/<prefix> dev " + dev + "`) so RoCE v2 can route");
                }
            }
        }
        if (selection instanceof NoUsableDevice n && !snapshot.devices().isEmpty()) {
            advice.add("nothing usable: " + n.reason());
        }
        if (!snapshot.devices().isEmpty()) {
            // only verbs registers memory with the kernel: without a device the limit does not matter
            memlock.flatMap(MemlockLimit::advice).ifPresent(advice::add);
        }
        return advice;
    }

    /** The whole report as text lines. */
    public List<String> lines() {
        List<String> out = new ArrayList<>();
        out.add("RDMA discovery (sysfs root " + snapshot.root() + ")");
        natives.ifPresent(n -> out.add("native libraries: " + n.describe()));
        if (!snapshot.infinibandClassPresent()) {
            out.add("devices: none (" + snapshot.infinibandClass() + " does not exist)");
        } else if (snapshot.devices().isEmpty()) {
            out.add("devices: none");
        } else {
            out.add("devices:");
            for (RdmaDevice d : snapshot.devices()) {
                out.add("  " + d.name() + ": node type " + d.nodeType() + ", node GUID " + d.nodeGuid()
                        + (d.software() ? ", software device" : "")
                        + ", net devices " + (d.netdevs().isEmpty() ? "none" : String.join(", ", d.netdevs())));
                for (RdmaPort p : d.ports()) {
                    out.add("    port " + p.number() + ": " + p.state() + " (" + p.physState() + "), link layer "
                            + p.linkLayer() + d.transport(p).map(t -> ", " + t).orElse(""));
                    for (Gid g : p.gids()) {
                        out.add("      GID[" + g.index() + "] " + g.address() + " " + g.type()
                                + g.netdev().map(n -> " " + n).orElse(""));
                    }
                }
            }
        }
        out.add(switch (selection) {
            case Selection s -> "selected: " + s.reason();
            case NoUsableDevice n -> "selected: nothing: " + n.reason();
        });
        out.add("memlock: " + memlock.map(MemlockLimit::toString).orElse("unknown (no /proc/self/limits)"));
        out.add("soft-RDMA kernel modules: " + kernel.describe());
        if (advice.isEmpty()) {
            out.add("advice: none, this host looks ready");
        } else {
            out.add("advice:");
            advice.forEach(a -> out.add("  - " + a));
        }
        return out;
    }

    public String toText() {
        return String.join(System.lineSeparator(), lines()) + System.lineSeparator();
    }

    /** Prints the report of this host (overrides: --device, --port, --gid-index, --interface, --address). */
    public static void main(String[] args) throws Exception {
        DiscoveryOptions o = DiscoveryOptions.auto();
        for (int i = 0; i + 1 < args.length; i += 2) {
            String v = args[i + 1];
            o = switch (args[i]) {
                case "--device" -> o.withDevice(v);
                case "--port" -> o.withPort(Integer.parseInt(v));
                case "--gid-index" -> o.withGidIndex(Integer.parseInt(v));
                case "--interface" -> o.withInterface(v);
                case "--address" -> o.withAddress(java.net.InetAddress.getByName(v));
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            };
        }
        System.out.print(forThisHost(o).toText());
    }
}
