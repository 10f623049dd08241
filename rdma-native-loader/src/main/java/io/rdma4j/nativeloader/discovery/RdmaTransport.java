package io.rdma4j.nativeloader.discovery;

/** How a usable port carries RDMA. */
public enum RdmaTransport {
    INFINIBAND("InfiniBand"), ROCE_V1("RoCE v1"), ROCE_V2("RoCE v2"), IWARP("iWARP");

    private final String display;

    RdmaTransport(String display) {
        this.display = display;
    }

    @Override
    public String toString() {
        return display;
    }
}
