package io.rdma4j.nativeloader.discovery;

import java.util.List;

/** Outcome of {@link DeviceSelector#select}: a {@link Selection} or {@link NoUsableDevice}, each with a reason. */
public sealed interface SelectionResult permits SelectionResult.Selection, SelectionResult.NoUsableDevice {

    /** Human-readable explanation, for logs and the doctor report. */
    String reason();

    /**
     * The device, port and GID to use.
     *
     * @param reason e.g. "rxe0 port 1: RoCE v2, GID index 1 ::ffff:10.9.9.1 matches interface rdma0"
     */
    record Selection(RdmaDevice device, RdmaPort port, Gid gid, WireProtocol transport, String reason)
            implements SelectionResult {

        public int gidIndex() {
            return gid.index();
        }
    }

    /**
     * Nothing usable.
     *
     * @param reason   one line saying why
     * @param rejected every port considered and why it was not taken
     */
    record NoUsableDevice(String reason, List<String> rejected) implements SelectionResult {
        public NoUsableDevice {
            rejected = List.copyOf(rejected);
        }
    }
}
