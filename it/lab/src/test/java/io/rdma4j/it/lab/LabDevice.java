package io.rdma4j.it.lab;

import java.util.List;
import java.util.Locale;

/**
 * A soft-RDMA device of the lab guest (see it/lab/README.md). {@link LabRunner} starts one guest JVM per
 * device and names it through the system properties {@code rdma4j.lab.device}, {@code rdma4j.lab.address}
 * and {@code rdma4j.lab.kind}; guest tests read it with {@link #current()}.
 */
public record LabDevice(String name, String address, Kind kind) {

    /** The kinds of software device the lab brings up; they differ in transport and connection setup. */
    public enum Kind {
        /** Soft-RoCE (RoCE v2, rdma_rxe): transport InfiniBand, link layer Ethernet. */
        RXE,
        /** Soft-iWARP (siw): transport iWARP; connections must be made through rdma_cm. */
        SIW
    }

    public static final String DEVICE_PROPERTY = "rdma4j.lab.device";
    public static final String ADDRESS_PROPERTY = "rdma4j.lab.address";
    public static final String KIND_PROPERTY = "rdma4j.lab.kind";

    /** The devices guest-init.sh creates, in the order the guest suite visits them. */
    public static final List<LabDevice> ALL = List.of(
            new LabDevice("rxe0", "10.9.9.1", Kind.RXE),
            new LabDevice("siw0", "10.9.10.1", Kind.SIW));

    /** The device this guest JVM tests; fails (never skips) outside a lab guest run. */
    public static LabDevice current() {
        String name = System.getProperty(DEVICE_PROPERTY);
        String address = System.getProperty(ADDRESS_PROPERTY);
        String kind = System.getProperty(KIND_PROPERTY);
        if (name == null || address == null || kind == null) {
            throw new IllegalStateException("*GuestTest classes run inside the soft-RDMA lab guest with -D"
                    + DEVICE_PROPERTY + ", -D" + ADDRESS_PROPERTY + " and -D" + KIND_PROPERTY
                    + " set: run SoftRdmaLabTest, or see it/lab/README.md to run one by hand");
        }
        return new LabDevice(name, address, Kind.valueOf(kind.toUpperCase(Locale.ROOT)));
    }

    /**
     * A second address on the device's netdev (guest-init.sh adds {@code .2} beside {@code .1}), with a GID of its own:
     * a second host on one device, for services that run one per host on a shared port (one log exporter per broker).
     */
    public String secondAddress() {
        return address.substring(0, address.lastIndexOf('.') + 1) + "2";
    }

    /** The JVM options that make {@link #current()} return this device. */
    public List<String> systemProperties() {
        return List.of("-D" + DEVICE_PROPERTY + "=" + name, "-D" + ADDRESS_PROPERTY + "=" + address,
                "-D" + KIND_PROPERTY + "=" + kind.name().toLowerCase(Locale.ROOT));
    }
}
