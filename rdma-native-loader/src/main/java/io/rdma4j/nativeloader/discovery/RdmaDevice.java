package io.rdma4j.nativeloader.discovery;

import java.util.List;
import java.util.Optional;

/**
 * One RDMA device under {@code /sys/class/infiniband}.
 *
 * @param name     e.g. {@code mlx5_0}, {@code rxe0}
 * @param nodeType {@code node_type}; {@link NodeType#RNIC} means iWARP
 * @param nodeGuid {@code node_guid} as sysfs prints it
 * @param software true for rxe/siw-style devices, which have no {@code device} (PCI) link
 * @param netdevs  net devices of the device ({@code device/net/*}) and of its GIDs
 * @param ports    the ports, by number
 */
public record RdmaDevice(String name, NodeType nodeType, String nodeGuid, boolean software, List<String> netdevs,
                         List<RdmaPort> ports) {

    public RdmaDevice {
        netdevs = List.copyOf(netdevs);
        ports = List.copyOf(ports);
    }

    public Optional<RdmaPort> port(int number) {
        return ports.stream().filter(p -> p.number() == number).findFirst();
    }

    /**
     * How {@code port} carries RDMA: iWARP for RNICs, InfiniBand for an InfiniBand link layer, RoCE v2
     * when the (Ethernet) port has a RoCE v2 GID, RoCE v1 otherwise; empty when it cannot be told.
     */
    public Optional<WireProtocol> transport(RdmaPort port) {
        if (nodeType == NodeType.RNIC) {
            return Optional.of(WireProtocol.IWARP);
        }
        return switch (port.linkLayer()) {
            case INFINIBAND -> Optional.of(WireProtocol.INFINIBAND);
            case ETHERNET -> Optional.of(port.gids().stream().anyMatch(g -> g.type() == GidType.ROCE_V2)
                    ? WireProtocol.ROCE_V2 : WireProtocol.ROCE_V1);
            case UNSPECIFIED -> Optional.empty();
        };
    }

    /** The transport a specific GID implies on {@code port}. */
    public Optional<WireProtocol> transport(RdmaPort port, Gid gid) {
        Optional<WireProtocol> t = transport(port);
        if (t.isPresent() && (t.get() == WireProtocol.ROCE_V1 || t.get() == WireProtocol.ROCE_V2)) {
            return Optional.of(gid.type() == GidType.ROCE_V2 ? WireProtocol.ROCE_V2 : WireProtocol.ROCE_V1);
        }
        return t;
    }
}
