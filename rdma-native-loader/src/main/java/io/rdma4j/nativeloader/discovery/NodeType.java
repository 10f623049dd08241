package io.rdma4j.nativeloader.discovery;

/** {@code node_type} in sysfs ("1: CA", "4: RNIC"); RNIC means an iWARP device. */
public enum NodeType {
    CA, SWITCH, ROUTER, RNIC, USNIC, USNIC_UDP, UNKNOWN;

    static NodeType parse(String sysfs) {
        String name = Sysfs.afterColon(sysfs);
        for (NodeType t : values()) {
            if (t.name().equals(name)) {
                return t;
            }
        }
        return UNKNOWN;
    }
}
