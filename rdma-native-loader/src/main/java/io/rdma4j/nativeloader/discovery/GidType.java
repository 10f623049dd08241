package io.rdma4j.nativeloader.discovery;

/**
 * {@code ports/<p>/gid_attrs/types/<i>}: the kernel prints "IB/RoCE v1" for both InfiniBand and RoCE v1
 * GIDs (the link layer tells them apart) and "RoCE v2" for RoCE v2.
 */
public enum GidType {
    IB_ROCE_V1("IB/RoCE v1"), ROCE_V2("RoCE v2"), UNKNOWN("unknown");

    private final String sysfs;

    GidType(String sysfs) {
        this.sysfs = sysfs;
    }

    static GidType parse(String value) {
        for (GidType t : values()) {
            if (t.sysfs.equalsIgnoreCase(value.trim())) {
                return t;
            }
        }
        return UNKNOWN;
    }

    @Override
    public String toString() {
        return sysfs;
    }
}
