package io.rdma4j.nativeloader.discovery;

import io.rdma4j.nativeloader.MemlockLimit;
import io.rdma4j.nativeloader.NativeLibraryUnavailableException;
import org.junit.jupiter.api.Test;

import java.util.Optional;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

class DiscoveryReportTest {

    static final Optional<MemlockLimit> LOW = Optional.of(new MemlockLimit(8L << 20, 8L << 20));
    static final Optional<MemlockLimit> UNLIMITED = Optional.of(new MemlockLimit(-1, -1));

    static final KernelModules WITH_RXE = new KernelModules(Optional.of("6.1.0-28-amd64"), true, Set.of("rdma_rxe", "siw"));
    static final KernelModules WITHOUT_MODULES = new KernelModules(Optional.of("6.18.44-fc"), false, Set.of());

    @Test
    void hostWithoutRdmaGetsSoftRoceAdviceAndNoMemlockAdvice() {
        var r = DiscoveryReport.create(Fixtures.scan("no-rdma-host"), DiscoveryOptions.auto().withInterface("eth0"), LOW,
                Optional.empty(), WITH_RXE);
        assertThat(r.chosen()).isEmpty();
        // without a device only tcp can run, and tcp registers nothing with the kernel
        assertThat(r.advice()).containsExactly("no /sys/class/infiniband: load a driver or use Soft-RoCE: "
                + "`modprobe rdma_rxe` then `rdma link add rxe0 type rxe netdev eth0`");
        assertThat(r.toText()).contains("devices: none (").contains("selected: nothing: no RDMA devices")
                .contains("memlock: memlock soft 8 MiB, hard 8 MiB")
                .contains("soft-RDMA kernel modules: rdma_rxe, siw for kernel 6.1.0-28-amd64");
    }

    @Test
    void kernelWithoutRdmaRxeIsPointedToTheLabInsteadOfModprobe() {
        var r = DiscoveryReport.create(Fixtures.scan("no-rdma-host"), DiscoveryOptions.auto(), LOW, Optional.empty(),
                WITHOUT_MODULES);
        assertThat(r.advice()).singleElement().satisfies(a -> assertThat(a)
                .startsWith("no /sys/class/infiniband (no RDMA driver loaded); this kernel (6.18.44-fc) has no rdma_rxe"
                        + " module (no /lib/modules/6.18.44-fc)")
                .contains("rdma4j runs on its tcp provider").contains("it/lab/rdma-lab.sh setup").contains("it/lab/README.md")
                .doesNotContain("modprobe").doesNotContain("memlock"));
        assertThat(r.toText()).contains("soft-RDMA kernel modules: no rdma_rxe or siw for kernel 6.18.44-fc"
                + " (no /lib/modules/6.18.44-fc)");

        var emptyClass = DiscoveryReport.create(Fixtures.scan("empty-class-host"), DiscoveryOptions.auto(), LOW,
                Optional.empty(), new KernelModules(Optional.of("6.1.0"), true, Set.of("siw")));
        assertThat(emptyClass.advice()).singleElement().satisfies(a -> assertThat(a)
                .startsWith("no RDMA devices: load the NIC's RDMA driver (mlx5_ib, irdma, ...); this kernel (6.1.0) has"
                        + " no rdma_rxe module, so Soft-RoCE cannot run here")
                .contains("soft-RDMA lab").doesNotContain("rdma link add"));
    }

    @Test
    void unknownKernelKeepsTheSoftRoceAdvice() {
        var r = DiscoveryReport.create(Fixtures.scan("empty-class-host"), DiscoveryOptions.auto().withInterface("eth1"),
                LOW, Optional.empty(), KernelModules.unknown());
        assertThat(r.advice()).containsExactly("no RDMA devices: load the NIC's RDMA driver (mlx5_ib, irdma, ...) or add"
                + " Soft-RoCE: `rdma link add rxe0 type rxe netdev eth1`");
    }

    @Test
    void hostWithADeviceGetsMemlockAdvice() {
        var r = DiscoveryReport.create(Fixtures.scan("rxe-host"), DiscoveryOptions.auto().withInterface("rdma0"), LOW,
                Optional.empty(), WITHOUT_MODULES);
        assertThat(r.chosen()).isPresent();
        assertThat(r.advice()).singleElement().satisfies(a -> assertThat(a)
                .startsWith("memlock 8 MiB is too low for registering large regions: set `ulimit -l unlimited`")
                .contains("LimitMEMLOCK=infinity"));
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
