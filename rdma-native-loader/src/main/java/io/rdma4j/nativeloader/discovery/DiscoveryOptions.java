package io.rdma4j.nativeloader.discovery;

import java.net.InetAddress;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * Overrides for automatic device selection; every field is optional ("auto").
 *
 * @param device        RDMA device name, e.g. {@code mlx5_0}
 * @param port          port number
 * @param gidIndex      GID index
 * @param interfaceName net device the GID must belong to, e.g. {@code eth0}
 * @param address       IP address the GID must carry (IPv4 as {@code ::ffff:a.b.c.d})
 */
public record DiscoveryOptions(Optional<String> device, OptionalInt port, OptionalInt gidIndex,
                               Optional<String> interfaceName, Optional<InetAddress> address) {

    private static final DiscoveryOptions AUTO =
            new DiscoveryOptions(Optional.empty(), OptionalInt.empty(), OptionalInt.empty(), Optional.empty(), Optional.empty());

    /** Fully automatic. */
    public static DiscoveryOptions auto() {
        return AUTO;
    }

    public DiscoveryOptions withDevice(String name) {
        return new DiscoveryOptions(Optional.of(name), port, gidIndex, interfaceName, address);
    }

    public DiscoveryOptions withPort(int number) {
        return new DiscoveryOptions(device, OptionalInt.of(number), gidIndex, interfaceName, address);
    }

    public DiscoveryOptions withGidIndex(int index) {
        return new DiscoveryOptions(device, port, OptionalInt.of(index), interfaceName, address);
    }

    public DiscoveryOptions withInterface(String name) {
        return new DiscoveryOptions(device, port, gidIndex, Optional.of(name), address);
    }

    public DiscoveryOptions withAddress(InetAddress ip) {
        return new DiscoveryOptions(device, port, gidIndex, interfaceName, Optional.of(ip));
    }
}
