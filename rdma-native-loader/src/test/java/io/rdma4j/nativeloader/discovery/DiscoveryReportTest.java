package io.rdma4j.nativeloader.discovery;

import io.rdma4j.nativeloader.MemlockLimit;
import io.rdma4j.nativeloader.NativeLibraryUnavailableException;
import org.junit.jupiter.api.Test;

import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

class DiscoveryReportTest {

    static final Optional<MemlockLimit> LOW = Optional.of(new MemlockLimit(8L << 20, 8L << 20));
    static final Optional<MemlockLimit> UNLIMITED = Optional.of(new MemlockLimit(-1, -1));

    @Test
    void hostWithoutRdmaGetsSoftRoceAndMemlockAdvice() {
        var r = DiscoveryReport.create(Fixtures.scan("no-rdma-host"), DiscoveryOptions.auto().withInterface("eth0"), LOW,
                Optional.empty());
        assertThat(r.chosen()).isEmpty();
        assertThat(r.advice()).hasSize(2);
        assertThat(r.advice().get(0)).isEqualTo("no /sys/class/infiniband: load a driver or use Soft-RoCE: "
                + "`modprobe rdma_rxe` then `rdma link add rxe0 type rxe netdev eth0`");
        assertThat(r.advice().get(1)).startsWith("memlock 8 MiB is too low for registering large regions: set `ulimit -l unlimited`")
                .contains("LimitMEMLOCK=infinity");
        assertThat(r.toText()).contains("devices: none (").contains("selected: nothing: no RDMA devices")
                .contains("memlock: memlock soft 8 MiB, hard 8 MiB");
    }

    @Test
    void downPortGetsCableAndLinkAdvice() {
        var r = DiscoveryReport.create(Fixtures.scan("down-host"), DiscoveryOptions.auto(), UNLIMITED, Optional.empty());
        assertThat(r.advice()).containsExactly(
                "mlx5_0 port 1 is DOWN (physical state Disabled): check the cable / switch port, or `ip link set ens1f0 up`",
                "nothing usable: no usable RDMA port: mlx5_0 port 1: DOWN (physical state Disabled)");
    }

    @Test
    void readyHostPrintsDevicesGidsAndTheChoice() {
        var r = DiscoveryReport.create(Fixtures.scan("rxe-host"), DiscoveryOptions.auto().withInterface("rdma0"), UNLIMITED,
                Optional.empty());
        assertThat(r.advice()).isEmpty();
        assertThat(r.chosen()).map(SelectionResult.Selection::gidIndex).contains(1);
        assertThat(r.lines()).contains(
                "  rxe0: node type CA, node GUID 5054:00ff:fe12:3401, software device, net devices rdma0",
                "    port 1: ACTIVE (LinkUp), link layer Ethernet, RoCE v2",
                "      GID[0] fe80::5054:ff:fe12:3401 RoCE v2 rdma0",
                "      GID[1] ::ffff:10.9.9.1 RoCE v2 rdma0",
                "selected: rxe0 port 1: RoCE v2, GID index 1 ::ffff:10.9.9.1 matches interface rdma0",
                "advice: none, this host looks ready");
    }

    @Test
    void missingLibrariesComeFirstInTheAdvice() {
        var missing = new NativeStatus(Optional.of(new NativeLibraryUnavailableException("libibverbs.so.1", null).getMessage()),
                Optional.empty(), Optional.empty(), Optional.empty());
        var r = DiscoveryReport.create(Fixtures.scan("rxe-host"), DiscoveryOptions.auto(), UNLIMITED, Optional.of(missing));
        assertThat(r.advice().getFirst()).contains("apt-get install libibverbs1 librdmacm1 ibverbs-providers");
        assertThat(r.toText()).contains("native libraries: cannot load libibverbs.so.1");
    }

    @Test
    void roceHostReportsTheDownSecondNic() {
        var r = DiscoveryReport.create(Fixtures.scan("roce-host"), DiscoveryOptions.auto(), UNLIMITED, Optional.empty());
        assertThat(r.chosen()).isPresent();
        assertThat(r.advice()).containsExactly(
                "mlx5_1 port 1 is DOWN (physical state Disabled): check the cable / switch port, or `ip link set enp1s0f1 up`");
    }

    @Test
    void thisHostReportIsConsistent() {
        // this project's build hosts have no RDMA: the report must say so instead of failing
        var r = DiscoveryReport.forThisHost(DiscoveryOptions.auto());
        assertThat(r.natives()).hasValueSatisfying(n -> assertThat(n.librariesLoaded()).isTrue());
        assertThat(r.memlock()).isPresent();
        if (r.snapshot().devices().isEmpty()) {
            assertThat(r.chosen()).isEmpty();
            assertThat(r.toText()).contains("libibverbs sees no devices");
        }
    }
}
