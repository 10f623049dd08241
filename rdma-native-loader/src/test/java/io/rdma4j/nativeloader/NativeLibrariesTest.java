package io.rdma4j.nativeloader;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Talks to the real libibverbs/librdmacm (CI installs libibverbs1 librdmacm1 ibverbs-providers). */
class NativeLibrariesTest {

    @Test
    void missingLibraryGivesOneClearExceptionNamingThePackages() {
        try (Arena arena = Arena.ofConfined()) {
            assertThatThrownBy(() -> NativeLibraries.load("libibverbs-rdma4j-missing.so.1", NativeLibraries.LIBRDMACM, arena))
                    .isInstanceOf(NativeLibraryUnavailableException.class)
                    .hasMessageContaining("libibverbs-rdma4j-missing.so.1")
                    .hasMessageContaining("apt-get install libibverbs1 librdmacm1 ibverbs-providers")
                    .hasMessageContaining("rdma-core")
                    .satisfies(e -> assertThat(((NativeLibraryUnavailableException) e).library())
                            .isEqualTo("libibverbs-rdma4j-missing.so.1"));
        }
    }

    @Test
    void installedLibrariesLoadBySoname() {
        NativeLibraries libs = NativeLibraries.require();
        assertThat(libs.verbs().find("ibv_get_device_list")).isPresent();
        assertThat(libs.rdmacm().find("rdma_create_event_channel")).isPresent();
        // static inline in verbs.h: must NOT be exported, which is why VerbsOps exists
        assertThat(libs.verbs().find("ibv_post_send")).isEmpty();
        assertThat(NativeLibraries.require()).isSameAs(libs);
        assertThat(NativeLibraries.isAvailable()).isTrue();
    }

    static List<String> sysfsDevices() throws Exception {
        Path cls = Path.of("/sys/class/infiniband");
        if (!Files.isDirectory(cls)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(cls)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void deviceListAgreesWithSysfsAndNoDevicesIsNotAnError() throws Exception {
        NativeProbe.VerbsDevices devices = NativeProbe.verbsDevices();
        List<String> expected = sysfsDevices();
        assertThat(devices.names().stream().sorted().toList()).isEqualTo(expected);
        if (expected.isEmpty()) {
            assertThat(devices.none()).isTrue();
            if (!Files.exists(Path.of("/sys/class/infiniband_verbs"))) {
                // no uverbs in the kernel (this project's build hosts): NULL with ENOSYS
                assertThat(devices.errno()).isEqualTo(Errno.ENOSYS);
                assertThat(devices.describe()).contains("no devices").contains("ENOSYS");
            }
        } else {
            assertThat(devices.errno()).isZero();
        }
    }

    @Test
    void rdmaCmWithoutDevicesIsUnavailableNotAnError() throws Exception {
        NativeProbe.RdmaCmStatus cm = NativeProbe.rdmaCm();
        if (sysfsDevices().isEmpty()) {
            assertThat(cm.available()).isFalse();
            assertThat(cm.errno()).isIn(Errno.ENODEV, Errno.ENOENT, Errno.ENOSYS);
            assertThat(cm.describe()).contains("unavailable").contains(Errno.name(cm.errno()));
        } else {
            assertThat(cm.available()).isTrue();
        }
    }

    @Test
    void errnoNamesAreSymbolic() {
        assertThat(Errno.name(38)).isEqualTo("ENOSYS");
        assertThat(Errno.name(19)).isEqualTo("ENODEV");
        assertThat(Errno.name(4242)).isEqualTo("errno 4242");
        assertThat(new NativeCallException("ibv_foo", 12)).hasMessage("ibv_foo failed: ENOMEM (12)");
    }
}
