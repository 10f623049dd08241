package io.rdma4j.it.lab;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The lab device, as the rdma-core tools see it: present, port active, of the expected transport. */
class DeviceInfoGuestTest {

    private static final Duration TOOL_TIMEOUT = Duration.ofSeconds(60);

    private final LabDevice device = LabDevice.current();

    @Test
    void portIsActive() throws Exception {
        String info = GuestCommand.run(TOOL_TIMEOUT, "ibv_devinfo", "-d", device.name()).requireSuccess();

        assertThat(info).containsPattern("hca_id:\\s+" + device.name() + "\\b");
        assertThat(info).containsPattern("state:\\s+PORT_ACTIVE \\(4\\)");
    }

    @Test
    void transportMatchesTheDeviceKind() throws Exception {
        String info = GuestCommand.run(TOOL_TIMEOUT, "ibv_devinfo", "-v", "-d", device.name()).requireSuccess();

        switch (device.kind()) {
            case RXE -> {
                assertThat(info).containsPattern("transport:\\s+InfiniBand \\(0\\)");
                assertThat(info).containsPattern("link_layer:\\s+Ethernet");
                // RoCE v2 addresses the port by an IPv4-mapped GID of the netdev's address.
                assertThat(info).containsPattern("GID\\[\\s*\\d+\\]:\\s+::ffff:" + device.address().replace(".", "\\.")
                        + ", RoCE v2");
            }
            case SIW -> assertThat(info).containsPattern("transport:\\s+iWARP \\(1\\)");
        }
    }

    @Test
    void rdmaResourceShowListsTheDevice() throws Exception {
        String resources = GuestCommand.run(TOOL_TIMEOUT, "rdma", "resource", "show").requireSuccess();

        assertThat(resources).containsPattern("(?m)^\\d+: " + device.name() + ": pd \\d+ cq \\d+ qp \\d+");
    }
}
