package io.rdma4j.nativeloader.discovery;

/** {@code enum ibv_port_state}, as sysfs prints it in {@code ports/<p>/state} ("4: ACTIVE"). */
public enum PortState {
    NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER, UNKNOWN;

    static PortState parse(String sysfs) {
        String name = Sysfs.afterColon(sysfs);
        for (PortState s : values()) {
            if (s.name().equals(name)) {
                return s;
            }
        }
        return UNKNOWN;
    }
}
