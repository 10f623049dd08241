package io.rdma4j.core.verbs;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.Doctor;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RegistrationException;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.internal.ProviderRegistry;
import io.rdma4j.core.spi.Availability;
import io.rdma4j.nativeloader.Errno;
import io.rdma4j.nativeloader.bindings.RdmaBindings;
import io.rdma4j.nativeloader.discovery.SysfsScanner;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.EnumSet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The verbs provider on a host without RDMA devices (the build hosts: libibverbs installed, no
 * /sys/class/infiniband devices), plus the pure mappings. The lab's *GuestTest classes cover real devices.
 */
class VerbsProviderHostTest {

    private static final TransportConfig VERBS = TransportConfig.builder().provider("verbs").build();

    @BeforeAll
    static void requireAHostWithoutRdma() {
        // These tests state what happens without devices; on an RDMA host the lab/guest tests apply instead.
        assumeTrue(SysfsScanner.host().scan().devices().isEmpty(), "this host has RDMA devices");
    }

    @Test
    void probeSaysUnusableWithAReasonAndNeverThrows() {
        Availability a = new VerbsProvider().probe(TransportConfig.defaults());
        assertThat(a.usable()).isFalse();
        assertThat(a.reason()).containsIgnoringCase("no RDMA devices");
    }

    @Test
    void autoFallsBackToTcpAndSaysWhy() {
        var selection = ProviderRegistry.explain(TransportConfig.defaults());
        assertThat(selection.provider()).isEqualTo("tcp");
        assertThat(selection.reason()).contains("verbs unusable: ").containsIgnoringCase("no RDMA devices");
        try (RdmaTransport t = RdmaTransport.open(TransportConfig.defaults())) {
            assertThat(t.provider()).isEqualTo("tcp");
            assertThat(t.selection().reason()).contains("verbs unusable");
        }
    }

    @Test
    void verbsByNameFailsWithAdvice() {
        assertThatThrownBy(() -> RdmaTransport.open(VERBS))
                .isInstanceOf(ProviderUnavailableException.class)
                .hasMessageContaining("verbs unusable")
                .hasMessageContaining("rdma link add rxe0");
    }

    @Test
    void badAddressOptionIsReportedNotThrown() {
        Availability a = new VerbsProvider().probe(VERBS.toBuilder().localAddress("not-an-ip").build());
        assertThat(a.usable()).isFalse();
        assertThat(a.reason()).contains("'address'").contains("not-an-ip");
    }

    @Test
    void doctorPrintsDiscoveryAndTheChoice() {
        String report = Doctor.report(TransportConfig.defaults());
        assertThat(report).contains("RDMA discovery").contains("memlock").contains("advice")
                .contains("verbs (auto preference 100): unusable")
                .contains("provider=auto chooses tcp");
    }

    @Test
    void verbsIsPreferredOverTcp() {
        assertThat(ProviderRegistry.providers().getFirst().name()).isEqualTo("verbs");
    }

    // ---- mappings ----

    @Test
    void accessFlagsMatchVerbsH() {
        assertThat(VerbsAccess.IBV_ACCESS_LOCAL_WRITE).isEqualTo(RdmaBindings.IBV_ACCESS_LOCAL_WRITE());
        assertThat(VerbsAccess.IBV_ACCESS_REMOTE_WRITE).isEqualTo(RdmaBindings.IBV_ACCESS_REMOTE_WRITE());
        assertThat(VerbsAccess.IBV_ACCESS_REMOTE_READ).isEqualTo(RdmaBindings.IBV_ACCESS_REMOTE_READ());
    }

    @Test
    void accessMapping() {
        int lw = RdmaBindings.IBV_ACCESS_LOCAL_WRITE();
        int rw = RdmaBindings.IBV_ACCESS_REMOTE_WRITE();
        int rr = RdmaBindings.IBV_ACCESS_REMOTE_READ();
        assertThat(VerbsAccess.flags(Access.remoteRead(), false)).isEqualTo(rr);
        assertThat(VerbsAccess.flags(Access.readSink(), false)).isEqualTo(lw | rr);
        assertThat(VerbsAccess.flags(Access.remoteReadWrite(), false)).isEqualTo(lw | rr | rw);
        assertThat(VerbsAccess.flags(EnumSet.of(Access.REMOTE_WRITE), false)).isEqualTo(lw | rw);
        assertThat(VerbsAccess.flags(EnumSet.noneOf(Access.class), false)).isZero();
        // iWARP: the sink of a READ is written by the peer's response, so local write needs remote write
        assertThat(VerbsAccess.flags(EnumSet.of(Access.LOCAL_WRITE), true)).isEqualTo(lw | rw);
        assertThat(VerbsAccess.flags(Access.remoteRead(), true)).isEqualTo(rr);
        assertThat(VerbsAccess.flags(Access.readSink(), true)).isEqualTo(lw | rw | rr);
        // a region without REMOTE_READ never gets it from the NIC, on iWARP either
        assertThat(VerbsAccess.flags(EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE), true)).isEqualTo(lw | rw);
    }

    @Test
    void completionStatusValuesMatchVerbsH() {
        assertThat(WorkCompletions.SUCCESS).isEqualTo(RdmaBindings.IBV_WC_SUCCESS());
        assertThat(WorkCompletions.LOC_LEN_ERR).isEqualTo(RdmaBindings.IBV_WC_LOC_LEN_ERR());
        assertThat(WorkCompletions.LOC_QP_OP_ERR).isEqualTo(RdmaBindings.IBV_WC_LOC_QP_OP_ERR());
        assertThat(WorkCompletions.LOC_PROT_ERR).isEqualTo(RdmaBindings.IBV_WC_LOC_PROT_ERR());
        assertThat(WorkCompletions.WR_FLUSH_ERR).isEqualTo(RdmaBindings.IBV_WC_WR_FLUSH_ERR());
        assertThat(WorkCompletions.LOC_ACCESS_ERR).isEqualTo(RdmaBindings.IBV_WC_LOC_ACCESS_ERR());
        assertThat(WorkCompletions.REM_INV_REQ_ERR).isEqualTo(RdmaBindings.IBV_WC_REM_INV_REQ_ERR());
        assertThat(WorkCompletions.REM_ACCESS_ERR).isEqualTo(RdmaBindings.IBV_WC_REM_ACCESS_ERR());
        assertThat(WorkCompletions.REM_OP_ERR).isEqualTo(RdmaBindings.IBV_WC_REM_OP_ERR());
        assertThat(WorkCompletions.RETRY_EXC_ERR).isEqualTo(RdmaBindings.IBV_WC_RETRY_EXC_ERR());
        assertThat(WorkCompletions.RNR_RETRY_EXC_ERR).isEqualTo(RdmaBindings.IBV_WC_RNR_RETRY_EXC_ERR());
        assertThat(WorkCompletions.REM_ABORT_ERR).isEqualTo(RdmaBindings.IBV_WC_REM_ABORT_ERR());
    }

    @Test
    void completionStatusMapping() {
        String name = NativeCalls.wcStatus(WorkCompletions.REM_ACCESS_ERR);
        assertThat(name).isEqualTo("remote access error");
        RdmaException e = WorkCompletions.exception(WorkCompletions.REM_ACCESS_ERR, name, "read", "/10.0.0.1:1");
        assertThat(e).isInstanceOf(RemoteAccessException.class).hasMessageContaining("remote access error");
        assertThat(((RemoteAccessException) e).reason()).isEqualTo(RemoteAccessException.Reason.ACCESS_DENIED);
        assertThat(WorkCompletions.exception(WorkCompletions.REM_INV_REQ_ERR, "x", "read", "p"))
                .isInstanceOf(RemoteAccessException.class);
        assertThat(WorkCompletions.exception(WorkCompletions.WR_FLUSH_ERR, NativeCalls.wcStatus(WorkCompletions.WR_FLUSH_ERR),
                "read", "p")).isInstanceOf(ConnectionClosedException.class).hasMessageContaining("Work Request Flushed Error");
        assertThat(WorkCompletions.exception(WorkCompletions.RETRY_EXC_ERR, "transport retry counter exceeded", "read", "p"))
                .isInstanceOf(ConnectionClosedException.class);
        RdmaException local = WorkCompletions.exception(WorkCompletions.LOC_PROT_ERR, "local protection error", "write", "p");
        assertThat(local).isNotInstanceOf(ConnectionClosedException.class).isNotInstanceOf(RemoteAccessException.class)
                .hasMessageContaining("local protection error");
    }

    @Test
    void lowMemlockRegistrationFailureNamesTheLimitAndTheFix() {
        RegistrationException e = VerbsTransport.registrationFailure(1 << 20, Errno.ENOMEM);
        assertThat(e.getMessage()).contains("ENOMEM").contains("memlock").contains("ulimit -l unlimited")
                .contains("LimitMEMLOCK=infinity");
        assertThat(VerbsTransport.registrationFailure(64, Errno.EINVAL).getMessage()).contains("EINVAL")
                .doesNotContain("ulimit");
    }
}
