package io.rdma4j.core;

import java.util.EnumSet;
import java.util.Set;

/**
 * What may be done to a registered region. Peers can only read a region unless it is registered with
 * {@link #REMOTE_WRITE}; the local side may use it as the sink of a read only with {@link #LOCAL_WRITE}.
 */
public enum Access {
    /** The local side may write into the region, e.g. as the sink of a one-sided read. */
    LOCAL_WRITE,
    /** Peers may read the region with one-sided reads. */
    REMOTE_READ,
    /** Peers may write the region with one-sided writes (implies {@link #LOCAL_WRITE}). */
    REMOTE_WRITE;

    /** A region peers may read: the usual case for published data. */
    public static Set<Access> remoteRead() {
        return EnumSet.of(REMOTE_READ);
    }

    /** A local buffer that receives one-sided reads and that peers may also read. */
    public static Set<Access> readSink() {
        return EnumSet.of(LOCAL_WRITE, REMOTE_READ);
    }

    /** Peers may read and write it. */
    public static Set<Access> remoteReadWrite() {
        return EnumSet.of(LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE);
    }

    /** Adds what the given rights imply (remote write needs local write on every RDMA NIC). */
    public static Set<Access> normalize(Set<Access> access) {
        EnumSet<Access> result = access.isEmpty() ? EnumSet.noneOf(Access.class) : EnumSet.copyOf(access);
        if (result.contains(REMOTE_WRITE)) {
            result.add(LOCAL_WRITE);
        }
        return result;
    }

    static int toBits(Set<Access> access) {
        int bits = 0;
        for (Access a : access) {
            bits |= 1 << a.ordinal();
        }
        return bits;
    }

    static Set<Access> fromBits(int bits) {
        EnumSet<Access> result = EnumSet.noneOf(Access.class);
        for (Access a : values()) {
            if ((bits & (1 << a.ordinal())) != 0) {
                result.add(a);
            }
        }
        return result;
    }
}
