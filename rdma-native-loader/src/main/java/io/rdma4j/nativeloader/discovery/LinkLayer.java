package io.rdma4j.nativeloader.discovery;

/** {@code ports/<p>/link_layer}: "InfiniBand" or "Ethernet" (iWARP NICs also say Ethernet). */
public enum LinkLayer {
    INFINIBAND("InfiniBand"), ETHERNET("Ethernet"), UNSPECIFIED("unspecified");

    private final String sysfs;

    LinkLayer(String sysfs) {
        this.sysfs = sysfs;
    }

    static LinkLayer parse(String value) {
        for (LinkLayer l : values()) {
            if (l.sysfs.equalsIgnoreCase(value.trim())) {
                return l;
            }
        }
        return UNSPECIFIED;
    }

    @Override
    public String toString() {
        return sysfs;
    }
}
