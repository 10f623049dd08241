package io.rdma4j.nativeloader.discovery;

import java.util.List;
import java.util.Optional;

/**
 * One port of an RDMA device as sysfs shows it.
 *
 * @param number    the port number (1-based)
 * @param state     logical state ({@code ports/<p>/state})
 * @param physState physical state text ({@code ports/<p>/phys_state}, e.g. "LinkUp", "Disabled")
 * @param linkLayer {@code ports/<p>/link_layer}
 * @param gids      the non-zero entries of the GID table, by index
 */
public record RdmaPort(int number, PortState state, String physState, LinkLayer linkLayer, List<Gid> gids) {

    public RdmaPort {
        gids = List.copyOf(gids);
    }

    public boolean active() {
        return state == PortState.ACTIVE;
    }

    public Optional<Gid> gid(int index) {
        return gids.stream().filter(g -> g.index() == index).findFirst();
    }

    /** Net devices named by this port's GID attributes. */
    public List<String> netdevs() {
        return gids.stream().flatMap(g -> g.netdev().stream()).distinct().toList();
    }
}
