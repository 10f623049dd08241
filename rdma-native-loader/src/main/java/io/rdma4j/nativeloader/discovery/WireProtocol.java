package io.rdma4j.nativeloader.discovery;

/** How a usable port carries RDMA: InfiniBand, RoCE v1 or v2, iWARP. */
public enum WireProtocol {
    INFINIBAND("InfiniBand"), ROCE_V1("RoCE v1"), ROCE_V2("RoCE v2"), IWARP("iWARP");

    private final String display;

    WireProtocol(String display) {
        this.display = display;
    }

    @Override
    public String toString() {
        return display;
    }
}
