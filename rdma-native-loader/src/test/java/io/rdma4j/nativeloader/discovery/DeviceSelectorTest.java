package io.rdma4j.nativeloader.discovery;

import io.rdma4j.nativeloader.discovery.SelectionResult.NoUsableDevice;
import io.rdma4j.nativeloader.discovery.SelectionResult.Selection;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class DeviceSelectorTest {

    static final DiscoveryOptions AUTO = DiscoveryOptions.auto();

    static Selection selected(String host, DiscoveryOptions o) {
        SelectionResult r = DeviceSelector.select(Fixtures.scan(host), o);
        assertThat(r).as(r.reason()).isInstanceOf(Selection.class);
        return (Selection) r;
    }

    static NoUsableDevice none(String host, DiscoveryOptions o) {
        SelectionResult r = DeviceSelector.select(Fixtures.scan(host), o);
        assertThat(r).as(r.reason()).isInstanceOf(NoUsableDevice.class);
        return (NoUsableDevice) r;
    }

    static InetAddress ip(String s) throws Exception {
        return InetAddress.getByName(s);
    }

    @Test
    void infiniBandUsesGidZero() {
        Selection s = selected("ib-host", AUTO);
        assertThat(s.transport()).isEqualTo(WireProtocol.INFINIBAND);
        assertThat(s.gidIndex()).isZero();
        assertThat(s.reason()).isEqualTo("mlx5_0 port 1: InfiniBand, GID index 0 fe80::b859:9f03:d6:1234 (first active port)");
    }

    @Test
    void roceAutoPrefersV2Ipv4MappedGidOnTheActivePort() {
        Selection s = selected("roce-host", AUTO);
        assertThat(s.device().name()).isEqualTo("mlx5_0");
        assertThat(s.transport()).isEqualTo(WireProtocol.ROCE_V2);
        assertThat(s.gidIndex()).isEqualTo(3);
        assertThat(s.reason()).isEqualTo("mlx5_0 port 1: RoCE v2, GID index 3 ::ffff:192.168.10.5 (IPv4-mapped GID preferred)");
    }

    @Test
    void roceMatchesConfiguredAddresses() throws Exception {
        Selection v4 = selected("roce-host", AUTO.withAddress(ip("192.168.10.5")));
        assertThat(v4.gidIndex()).isEqualTo(3);
        assertThat(v4.reason()).endsWith("matches address 192.168.10.5");
        Selection v6 = selected("roce-host", AUTO.withAddress(ip("2001:db8::5")).withInterface("enp1s0f0"));
        assertThat(v6.gidIndex()).isEqualTo(5);
        assertThat(v6.transport()).isEqualTo(WireProtocol.ROCE_V2);
        assertThat(v6.reason()).isEqualTo(
                "mlx5_0 port 1: RoCE v2, GID index 5 2001:db8::5 matches interface enp1s0f0 and address 2001:db8:0:0:0:0:0:5");
    }

    @Test
    void unknownAddressIsNothingUsableWithEveryPortExplained() throws Exception {
        NoUsableDevice n = none("roce-host", AUTO.withAddress(ip("10.1.1.1")));
        assertThat(n.rejected()).containsExactly(
                "mlx5_0 port 1: no RoCE GID carries address 10.1.1.1 (is the address assigned to the interface?)",
                "mlx5_1 port 1: DOWN (physical state Disabled)");
        assertThat(n.reason()).startsWith("no usable RDMA port: mlx5_0 port 1: no RoCE GID carries address 10.1.1.1");
    }

    @Test
    void interfaceOfTheDownPortIsNotUsable() {
        NoUsableDevice n = none("roce-host", AUTO.withInterface("enp1s0f1"));
        assertThat(n.rejected()).containsExactly(
                "mlx5_0 port 1: not on interface enp1s0f1 (net devices: enp1s0f0)",
                "mlx5_1 port 1: DOWN (physical state Disabled)");
    }

    @Test
    void gidIndexOverrideIsHonouredAndDecidesTheRoceVersion() {
        Selection s = selected("roce-host", AUTO.withGidIndex(2));
        assertThat(s.transport()).isEqualTo(WireProtocol.ROCE_V1);
        assertThat(s.reason()).isEqualTo("mlx5_0 port 1: RoCE v1, GID index 2 ::ffff:192.168.10.5 (configured GID index)");
        assertThat(none("roce-host", AUTO.withGidIndex(7)).rejected().getFirst())
                .isEqualTo("mlx5_0 port 1: configured GID index 7 not present (valid: 0, 1, 2, 3, 4, 5)");
    }

    @Test
    void gidIndexOverrideMustCarryTheConfiguredAddress() throws Exception {
        assertThat(none("roce-host", AUTO.withGidIndex(1).withAddress(ip("192.168.10.5"))).rejected().getFirst())
                .contains("configured GID index 1 fe80::b859:9fff:fe12:3456 does not carry address 192.168.10.5");
    }

    @Test
    void deviceAndPortOverrides() {
        assertThat(none("roce-host", AUTO.withDevice("mlx5_9")).reason())
                .isEqualTo("configured device mlx5_9 not found (present: mlx5_0, mlx5_1)");
        assertThat(none("roce-host", AUTO.withDevice("mlx5_1")).reason())
                .isEqualTo("no usable RDMA port: mlx5_1 port 1: DOWN (physical state Disabled)");
        assertThat(none("roce-host", AUTO.withPort(2)).rejected())
                .containsExactly("mlx5_0: no port 2 (ports: 1)", "mlx5_1: no port 2 (ports: 1)");
        assertThat(selected("iwarp-host", AUTO.withPort(1)).port().number()).isEqualTo(1);
        assertThat(none("iwarp-host", AUTO.withPort(2)).rejected()).containsExactly("cxgb4_0 port 2: DOWN (physical state Disabled)");
    }

    @Test
    void softRoceMatchesItsInterface() {
        Selection s = selected("rxe-host", AUTO.withInterface("rdma0"));
        assertThat(s.reason()).isEqualTo("rxe0 port 1: RoCE v2, GID index 1 ::ffff:10.9.9.1 matches interface rdma0");
        assertThat(none("rxe-host", AUTO.withInterface("eth0")).rejected())
                .containsExactly("rxe0 port 1: not on interface eth0 (net devices: rdma0)");
    }

    @Test
    void iwarpPortIsPinnedByMac() {
        Selection s = selected("iwarp-host", AUTO);
        assertThat(s.transport()).isEqualTo(WireProtocol.IWARP);
        assertThat(s.gidIndex()).isZero();
        assertThat(s.reason()).isEqualTo("cxgb4_0 port 1: iWARP, GID index 0 7:433a:5e60:: (first active port)");
        assertThat(selected("iwarp-host", AUTO.withInterface("enp3s0f4")).reason()).endsWith("matches interface enp3s0f4");
        // enp3s0f4d1 is listed under device/net but belongs to port 2, which is down
        assertThat(none("iwarp-host", AUTO.withInterface("enp3s0f4d1")).rejected()).containsExactly(
                "cxgb4_0 port 1: not on interface enp3s0f4d1 (net devices: enp3s0f4, enp3s0f4d1)",
                "cxgb4_0 port 2: DOWN (physical state Disabled)");
    }

    @Test
    void softIwarpWithoutNetdevLinksIsFoundByMac() throws Exception {
        Selection s = selected("siw-host", AUTO.withInterface("rdma1"));
        assertThat(s.device().name()).isEqualTo("siw0");
        assertThat(s.transport()).isEqualTo(WireProtocol.IWARP);
        assertThat(none("siw-host", AUTO.withInterface("eth0")).reason()).contains("not on interface eth0");
        assertThat(selected("siw-host", AUTO.withAddress(ip("10.0.0.1"))).reason())
                .endsWith("(address 10.0.0.1 not checked: iWARP GIDs carry no IP address)");
    }

    @Test
    void hardwareIsPreferredOverSoftwareDevices() {
        List<RdmaDevice> devices = new ArrayList<>(Fixtures.scan("rxe-host").devices());
        devices.addAll(Fixtures.scan("roce-host").devices());
        var mixed = new SysfsScanner.Snapshot(Fixtures.root("rxe-host"), true, devices, java.util.Map.of());
        assertThat(((Selection) DeviceSelector.select(mixed, AUTO)).device().name()).isEqualTo("mlx5_0");
        assertThat(((Selection) DeviceSelector.select(mixed, AUTO.withDevice("rxe0"))).device().name()).isEqualTo("rxe0");
    }

    @Test
    void downPortAndMissingDevicesCarryReasons() {
        assertThat(none("down-host", AUTO).reason())
                .isEqualTo("no usable RDMA port: mlx5_0 port 1: DOWN (physical state Disabled)");
        assertThat(none("no-rdma-host", AUTO).reason()).startsWith("no RDMA devices: ")
                .endsWith("sys/class/infiniband does not exist (no RDMA driver loaded)");
        assertThat(none("empty-class-host", AUTO).reason()).startsWith("no RDMA devices under ");
    }
}
