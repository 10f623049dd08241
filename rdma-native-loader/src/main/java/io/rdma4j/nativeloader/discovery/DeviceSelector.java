package io.rdma4j.nativeloader.discovery;

import io.rdma4j.nativeloader.discovery.SelectionResult.NoUsableDevice;
import io.rdma4j.nativeloader.discovery.SelectionResult.Selection;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * Chooses device, port and GID index. Rules, in order:
 * <ol>
 *   <li>overrides restrict the candidates (device name, port, GID index, interface, IP address);</li>
 *   <li>only ACTIVE ports with a known transport are usable;</li>
 *   <li>hardware devices come before software ones (rxe, siw), then sysfs order;</li>
 *   <li>InfiniBand and iWARP use GID index 0; RoCE prefers a RoCE v2 GID on the configured interface
 *       carrying the configured address, IPv4-mapped ({@code ::ffff:a.b.c.d}) first unless an IPv6 address
 *       is configured, then global before link-local, then RoCE v1.</li>
 * </ol>
 */
public final class DeviceSelector {

    private DeviceSelector() {
    }

    public static SelectionResult select(SysfsScanner.Snapshot snapshot, DiscoveryOptions options) {
        if (!snapshot.infinibandClassPresent()) {
            return new NoUsableDevice("no RDMA devices: " + snapshot.infinibandClass()
                    + " does not exist (no RDMA driver loaded)", List.of());
        }
        if (snapshot.devices().isEmpty()) {
            return new NoUsableDevice("no RDMA devices under " + snapshot.infinibandClass(), List.of());
        }
        List<RdmaDevice> devices = snapshot.devices();
        if (options.device().isPresent()) {
            String wanted = options.device().get();
            devices = devices.stream().filter(d -> d.name().equals(wanted)).toList();
            if (devices.isEmpty()) {
                return new NoUsableDevice("configured device " + wanted + " not found (present: "
                        + snapshot.devices().stream().map(RdmaDevice::name).collect(Collectors.joining(", ")) + ")",
                        List.of());
            }
        }
        devices = devices.stream().sorted(Comparator.comparing(RdmaDevice::software)).toList(); // stable

        List<String> rejected = new ArrayList<>();
        for (RdmaDevice d : devices) {
            if (options.port().isPresent() && d.port(options.port().getAsInt()).isEmpty()) {
                rejected.add(d.name() + ": no port " + options.port().getAsInt() + " (ports: "
                        + d.ports().stream().map(p -> String.valueOf(p.number())).collect(Collectors.joining(", ")) + ")");
                continue;
            }
            for (RdmaPort p : d.ports()) {
                if (options.port().isPresent() && p.number() != options.port().getAsInt()) {
                    continue;
                }
                String label = d.name() + " port " + p.number();
                Outcome o = consider(d, p, options, snapshot);
                if (o.selection != null) {
                    return o.selection;
                }
                rejected.add(label + ": " + o.rejection);
            }
        }
        return new NoUsableDevice("no usable RDMA port: " + String.join("; ", rejected), rejected);
    }

    private record Outcome(Selection selection, String rejection) {
        static Outcome reject(String why) {
            return new Outcome(null, why);
        }
    }

    private static Outcome consider(RdmaDevice d, RdmaPort p, DiscoveryOptions options, SysfsScanner.Snapshot snapshot) {
        if (!p.active()) {
            return Outcome.reject(p.state() + " (physical state " + p.physState() + ")");
        }
        Optional<WireProtocol> transport = d.transport(p);
        if (transport.isEmpty()) {
            return Outcome.reject("link layer unspecified, transport unknown");
        }
        Optional<String> iface = options.interfaceName();
        if (iface.isPresent() && !onInterface(d, p, transport.get(), iface.get(), snapshot)) {
            return Outcome.reject("not on interface " + iface.get() + " (net devices: "
                    + (d.netdevs().isEmpty() ? "none" : String.join(", ", d.netdevs())) + ")");
        }
        boolean roce = transport.get() == WireProtocol.ROCE_V1 || transport.get() == WireProtocol.ROCE_V2;
        if (p.gids().isEmpty()) {
            return Outcome.reject("empty GID table" + (roce ? " (no IP address on its net device?)" : ""));
        }
        String label = d.name() + " port " + p.number() + ": ";
        if (options.gidIndex().isPresent()) {
            int index = options.gidIndex().getAsInt();
            Optional<Gid> gid = p.gid(index);
            if (gid.isEmpty()) {
                return Outcome.reject("configured GID index " + index + " not present (valid: "
                        + p.gids().stream().map(g -> String.valueOf(g.index())).collect(Collectors.joining(", ")) + ")");
            }
            Gid g = gid.get();
            if (roce && iface.isPresent() && g.netdev().isPresent() && !g.netdev().get().equals(iface.get())) {
                return Outcome.reject("configured GID index " + index + " is on " + g.netdev().get()
                        + ", not on interface " + iface.get());
            }
            if (roce && options.address().isPresent() && !g.matches(options.address().get())) {
                return Outcome.reject("configured GID index " + index + " " + g.address() + " does not carry address "
                        + options.address().get().getHostAddress());
            }
            WireProtocol t = d.transport(p, g).orElseThrow();
            return select(d, p, g, t, label + t + ", GID index " + index + " " + g.address() + " (configured GID index)");
        }
        if (!roce) {
            Gid g = p.gids().getFirst(); // index 0 on IB (subnet prefix + port GUID) and iWARP (MAC)
            String why = matchText(iface, Optional.empty());
            if (options.address().isPresent()) {
                why += " (address " + options.address().get().getHostAddress()
                        + " not checked: " + transport.get() + " GIDs carry no IP address)";
            } else if (why.isEmpty()) {
                why = " (first active port)";
            }
            return select(d, p, g, transport.get(), label + transport.get() + ", GID index " + g.index() + " "
                    + g.address() + why);
        }
        Optional<InetAddress> address = options.address();
        List<Gid> candidates = p.gids().stream()
                .filter(g -> g.type() != GidType.UNKNOWN)
                .filter(g -> iface.isEmpty() || g.netdev().map(iface.get()::equals).orElse(true))
                .filter(g -> address.isEmpty() || g.matches(address.get()))
                .sorted(Comparator.<Gid>comparingInt(g -> g.type() == GidType.ROCE_V2 ? 0 : 1)
                        .thenComparingInt(g -> g.ipv4().isPresent() ? 0 : g.isLinkLocal() ? 2 : 1)
                        .thenComparingInt(Gid::index))
                .toList();
        if (candidates.isEmpty()) {
            return Outcome.reject("no RoCE GID" + address.map(a -> " carries address " + a.getHostAddress()).orElse("")
                    + iface.map(i -> " on interface " + i).orElse("")
                    + (address.isPresent() ? " (is the address assigned to the interface?)" : ""));
        }
        Gid g = candidates.getFirst();
        WireProtocol t = d.transport(p, g).orElseThrow();
        String why = matchText(iface, address);
        if (why.isEmpty()) {
            why = g.ipv4().isPresent() ? " (IPv4-mapped GID preferred)"
                    : g.isLinkLocal() ? " (only a link-local GID: assign an IP address to "
                    + g.netdev().orElse("the net device") + " for routable RoCE)" : " (global GID)";
        }
        return select(d, p, g, t, label + t + ", GID index " + g.index() + " " + g.address() + why);
    }

    /**
     * iWARP GID 0 starts with the port's MAC, which pins the port exactly (a two-port NIC lists both net
     * devices under device/net; siw lists none); other ports go by the GID and device net devices.
     */
    private static boolean onInterface(RdmaDevice d, RdmaPort p, WireProtocol t, String iface,
                                       SysfsScanner.Snapshot snapshot) {
        String mac = snapshot.netdevMacs().get(iface);
        if (t == WireProtocol.IWARP && mac != null) {
            return macMatches(p, mac);
        }
        return p.netdevs().contains(iface) || (p.netdevs().isEmpty() && d.netdevs().contains(iface));
    }

    /** siw and other iWARP devices may expose no net device link; their GID 0 starts with the MAC. */
    private static boolean macMatches(RdmaPort p, String mac) {
        return mac != null && !p.gids().isEmpty() && p.gids().getFirst().macPrefix().equals(mac);
    }

    private static String matchText(Optional<String> iface, Optional<InetAddress> address) {
        String a = address.map(x -> "address " + x.getHostAddress()).orElse("");
        String i = iface.map(x -> "interface " + x).orElse("");
        if (a.isEmpty() && i.isEmpty()) {
            return "";
        }
        return " matches " + (a.isEmpty() ? i : i.isEmpty() ? a : i + " and " + a);
    }

    private static Outcome select(RdmaDevice d, RdmaPort p, Gid g, WireProtocol t, String reason) {
        return new Outcome(new Selection(d, p, g, t, reason), null);
    }
}
