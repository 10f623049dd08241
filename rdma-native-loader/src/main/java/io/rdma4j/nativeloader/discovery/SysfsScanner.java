package io.rdma4j.nativeloader.discovery;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

/**
 * Reads RDMA devices from sysfs below a configurable root ("/" on a real host, a fixture tree in tests):
 * {@code sys/class/infiniband/<dev>/{node_type,node_guid,device/net/*,ports/<p>/{state,phys_state,
 * link_layer,gids/<i>,gid_attrs/types/<i>,gid_attrs/ndevs/<i>}},parent}} and
 * {@code sys/class/net/<if>/address} (iWARP GIDs embed the MAC, which ties them to a net device). Missing or unreadable attributes are
 * tolerated: sysfs returns errors for unused GID slots, and drivers differ in what they expose.
 */
public final class SysfsScanner {

    /** What the scan found. */
    public record Snapshot(Path root, boolean infinibandClassPresent, List<RdmaDevice> devices,
                           Map<String, String> netdevMacs) {
        public Snapshot {
            devices = List.copyOf(devices);
            netdevMacs = Map.copyOf(netdevMacs);
        }

        public Path infinibandClass() {
            return root.resolve(CLASS_PATH);
        }
    }

    static final String CLASS_PATH = "sys/class/infiniband";

    private final Path root;

    public SysfsScanner(Path root) {
        this.root = Objects.requireNonNull(root, "root");
    }

    /** Scans the real {@code /sys}. */
    public static SysfsScanner host() {
        return new SysfsScanner(Path.of("/"));
    }

    public Path root() {
        return root;
    }

    public Snapshot scan() {
        Path cls = root.resolve(CLASS_PATH);
        Map<String, String> macs = new TreeMap<>();
        Path net = root.resolve("sys/class/net");
        for (String n : Sysfs.list(net)) {
            Sysfs.read(net.resolve(n).resolve("address")).ifPresent(a -> macs.put(n, a.toLowerCase(Locale.ROOT)));
        }
        if (!Files.isDirectory(cls)) {
            return new Snapshot(root, false, List.of(), macs);
        }
        List<RdmaDevice> devices = new ArrayList<>();
        for (String name : Sysfs.list(cls)) {
            if (name.startsWith(".")) {
                continue; // not a device (sysfs has no dot entries; fixture trees may)
            }
            devices.add(device(name, cls.resolve(name)));
        }
        return new Snapshot(root, true, devices, macs);
    }

    private static RdmaDevice device(String name, Path dir) {
        NodeType nodeType = Sysfs.read(dir.resolve("node_type")).map(NodeType::parse).orElse(NodeType.UNKNOWN);
        String guid = Sysfs.read(dir.resolve("node_guid")).orElse("");
        boolean software = !Files.exists(dir.resolve("device"));
        Set<String> netdevs = new LinkedHashSet<>(Sysfs.list(dir.resolve("device").resolve("net")));
        Sysfs.read(dir.resolve("parent")).ifPresent(netdevs::add); // rxe: the net device it is bound to
        List<RdmaPort> ports = new ArrayList<>();
        for (String p : Sysfs.list(dir.resolve("ports"))) {
            if (!p.chars().allMatch(Character::isDigit)) {
                continue;
            }
            RdmaPort port = port(Integer.parseInt(p), dir.resolve("ports").resolve(p));
            netdevs.addAll(port.netdevs());
            ports.add(port);
        }
        return new RdmaDevice(name, nodeType, guid, software, List.copyOf(netdevs), ports);
    }

    private static RdmaPort port(int number, Path dir) {
        PortState state = Sysfs.read(dir.resolve("state")).map(PortState::parse).orElse(PortState.UNKNOWN);
        String phys = Sysfs.read(dir.resolve("phys_state")).map(Sysfs::afterColon).orElse("unknown");
        LinkLayer link = Sysfs.read(dir.resolve("link_layer")).map(LinkLayer::parse).orElse(LinkLayer.UNSPECIFIED);
        List<Gid> gids = new ArrayList<>();
        Path attrs = dir.resolve("gid_attrs");
        for (String i : Sysfs.list(dir.resolve("gids"))) {
            if (!Sysfs.isNumber(i)) {
                continue;
            }
            Optional<String> text = Sysfs.read(dir.resolve("gids").resolve(i));
            if (text.isEmpty() || Gid.isZero(text.get())) {
                // Most of a RoCE table is empty (rxe has 1024 entries): their attributes are not read, since each
                // read is a file open, and opening a transport scans the table.
                continue;
            }
            GidType type = Sysfs.read(attrs.resolve("types").resolve(i)).map(GidType::parse).orElse(GidType.UNKNOWN);
            Optional<String> ndev = Sysfs.read(attrs.resolve("ndevs").resolve(i)).filter(s -> !s.isEmpty());
            try {
                gids.add(Gid.parse(Integer.parseInt(i), text.get(), type, ndev));
            } catch (IllegalArgumentException e) {
                continue; // a malformed entry must not hide the rest of the table
            }
        }
        return new RdmaPort(number, state, phys, link, gids);
    }
}
