package io.rdma4j.nativeloader.discovery;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class SysfsScannerTest {

    @Test
    void mlx5OnInfiniBand() {
        var snap = Fixtures.scan("ib-host");
        assertThat(snap.infinibandClassPresent()).isTrue();
        RdmaDevice d = snap.devices().getFirst();
        assertThat(d.name()).isEqualTo("mlx5_0");
        assertThat(d.nodeType()).isEqualTo(NodeType.CA);
        assertThat(d.nodeGuid()).isEqualTo("b859:9f03:00d6:1234");
        assertThat(d.software()).isFalse();
        assertThat(d.netdevs()).containsExactly("ib0");
        RdmaPort p = d.ports().getFirst();
        assertThat(p.number()).isEqualTo(1);
        assertThat(p.state()).isEqualTo(PortState.ACTIVE);
        assertThat(p.physState()).isEqualTo("LinkUp");
        assertThat(p.linkLayer()).isEqualTo(LinkLayer.INFINIBAND);
        assertThat(p.gids()).hasSize(1); // zero slots are skipped
        assertThat(p.gids().getFirst().type()).isEqualTo(GidType.IB_ROCE_V1);
        assertThat(d.transport(p)).contains(WireProtocol.INFINIBAND);
    }

    @Test
    void mlx5OnRoceWithV1AndV2Gids() {
        var snap = Fixtures.scan("roce-host");
        assertThat(snap.devices()).extracting(RdmaDevice::name).containsExactly("mlx5_0", "mlx5_1");
        RdmaDevice d = snap.devices().getFirst();
        RdmaPort p = d.port(1).orElseThrow();
        assertThat(p.linkLayer()).isEqualTo(LinkLayer.ETHERNET);
        assertThat(p.gids()).extracting(Gid::index).containsExactly(0, 1, 2, 3, 4, 5);
        assertThat(p.gids()).extracting(Gid::type).containsExactly(GidType.IB_ROCE_V1, GidType.ROCE_V2,
                GidType.IB_ROCE_V1, GidType.ROCE_V2, GidType.IB_ROCE_V1, GidType.ROCE_V2);
        assertThat(p.gid(3).orElseThrow().address()).isEqualTo("::ffff:192.168.10.5");
        assertThat(p.netdevs()).containsExactly("enp1s0f0");
        assertThat(d.transport(p)).contains(WireProtocol.ROCE_V2);
        assertThat(d.transport(p, p.gid(2).orElseThrow())).contains(WireProtocol.ROCE_V1);
        RdmaPort down = snap.devices().get(1).port(1).orElseThrow();
        assertThat(down.state()).isEqualTo(PortState.DOWN);
        assertThat(down.physState()).isEqualTo("Disabled");
        assertThat(snap.netdevMacs()).containsEntry("enp1s0f0", "ba:59:9f:12:34:56");
    }

    @Test
    void iwarpNicIsAnRnicWithMacGids() {
        RdmaDevice d = Fixtures.scan("iwarp-host").devices().getFirst();
        assertThat(d.name()).isEqualTo("cxgb4_0");
        assertThat(d.nodeType()).isEqualTo(NodeType.RNIC);
        assertThat(d.ports()).extracting(RdmaPort::state).containsExactly(PortState.ACTIVE, PortState.DOWN);
        RdmaPort p = d.ports().getFirst();
        assertThat(d.transport(p)).contains(WireProtocol.IWARP);
        assertThat(p.gids().getFirst().type()).isEqualTo(GidType.UNKNOWN); // no gid_attrs on iWARP
        assertThat(d.netdevs()).containsExactly("enp3s0f4", "enp3s0f4d1");
    }

    @Test
    void softRoceIsASoftwareDeviceBoundToItsParent() {
        RdmaDevice d = Fixtures.scan("rxe-host").devices().getFirst();
        assertThat(d.name()).isEqualTo("rxe0");
        assertThat(d.software()).isTrue();
        assertThat(d.netdevs()).containsExactly("rdma0");
        assertThat(d.ports().getFirst().gids()).extracting(Gid::type).containsOnly(GidType.ROCE_V2);
        assertThat(d.transport(d.ports().getFirst())).contains(WireProtocol.ROCE_V2);
    }

    @Test
    void softIwarp() {
        RdmaDevice d = Fixtures.scan("siw-host").devices().getFirst();
        assertThat(d.name()).isEqualTo("siw0");
        assertThat(d.software()).isTrue();
        assertThat(d.netdevs()).isEmpty();
        assertThat(d.transport(d.ports().getFirst())).contains(WireProtocol.IWARP);
    }

    @Test
    void hostWithoutRdma() {
        var snap = Fixtures.scan("no-rdma-host");
        assertThat(snap.infinibandClassPresent()).isFalse();
        assertThat(snap.devices()).isEmpty();
        assertThat(snap.netdevMacs()).containsKey("eth0");
    }

    @Test
    void emptyClassDirectory() {
        var snap = Fixtures.scan("empty-class-host");
        assertThat(snap.infinibandClassPresent()).isTrue();
        assertThat(snap.devices()).isEmpty();
    }

    @Test
    void naturalOrderSortsPortsAndGidsNumerically() {
        List<String> l = new java.util.ArrayList<>(List.of("10", "2", "1023", "1", "b", "999", "0", "a"));
        l.sort(Sysfs::naturalOrder);
        assertThat(l).containsExactly("0", "1", "2", "10", "999", "1023", "a", "b");
    }
}
