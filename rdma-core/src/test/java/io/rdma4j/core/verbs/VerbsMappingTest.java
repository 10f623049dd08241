package io.rdma4j.core.verbs;

import io.rdma4j.core.Access;
import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.doctor.Doctor;
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
import org.junit.jupiter.api.Test;

import java.util.EnumSet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What holds for the verbs provider on any host: its preference over tcp, and how access rights, work
 * completion statuses and registration failures map to rdma4j (checked against the generated bindings).
 */
class VerbsMappingTest {

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
        String name = io.rdma4j.nativeloader.Verbs.completionStatus(WorkCompletions.REM_ACCESS_ERR);
        assertThat(name).isEqualTo("remote access error");
        RdmaException e = WorkCompletions.exception(WorkCompletions.REM_ACCESS_ERR, name, "read", "/10.0.0.1:1");
        assertThat(e).isInstanceOf(RemoteAccessException.class).hasMessageContaining("remote access error");
        assertThat(((RemoteAccessException) e).reason()).isEqualTo(RemoteAccessException.Reason.ACCESS_DENIED);
        assertThat(WorkCompletions.exception(WorkCompletions.REM_INV_REQ_ERR, "x", "read", "p"))
                .isInstanceOf(RemoteAccessException.class);
        assertThat(WorkCompletions.exception(WorkCompletions.WR_FLUSH_ERR, io.rdma4j.nativeloader.Verbs.completionStatus(WorkCompletions.WR_FLUSH_ERR),
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
