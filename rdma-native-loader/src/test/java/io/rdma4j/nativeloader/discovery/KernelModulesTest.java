package io.rdma4j.nativeloader.discovery;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/** Fixture roots built in a temporary directory: /proc/sys/kernel/osrelease, /sys/module, /lib/modules. */
class KernelModulesTest {

    @TempDir
    Path root;

    private void write(String path, String content) throws IOException {
        Path file = root.resolve(path);
        Files.createDirectories(file.getParent());
        Files.writeString(file, content);
    }

    @Test
    void kernelWithoutModuleTreeLacksSoftRdma() throws IOException {
        write("proc/sys/kernel/osrelease", "6.18.44-fc-v657\n");
        KernelModules k = KernelModules.scan(root);
        assertThat(k.release()).contains("6.18.44-fc-v657");
        assertThat(k.moduleDir()).isFalse();
        assertThat(k.available()).isEmpty();
        assertThat(k.lacks(KernelModules.RXE)).isTrue();
        assertThat(k.describe()).isEqualTo("no rdma_rxe or siw for kernel 6.18.44-fc-v657 (no /lib/modules/6.18.44-fc-v657)");
    }

    @Test
    void modulesDepAndBuiltinListTheModules() throws IOException {
        write("proc/sys/kernel/osrelease", "6.1.0-28-amd64\n");
        write("lib/modules/6.1.0-28-amd64/modules.dep",
                "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: kernel/drivers/infiniband/core/ib_uverbs.ko.xz\n"
                        + "kernel/drivers/net/dummy.ko.xz:\n"
                        + "kernel/drivers/infiniband/sw/siwx/siwx.ko.xz:\n");
        KernelModules k = KernelModules.scan(root);
        assertThat(k.moduleDir()).isTrue();
        assertThat(k.available()).containsExactly(KernelModules.RXE);
        assertThat(k.lacks(KernelModules.RXE)).isFalse();
        assertThat(k.lacks(KernelModules.SIW)).isTrue();

        write("lib/modules/6.1.0-28-amd64/modules.builtin", "kernel/drivers/infiniband/sw/siw/siw.ko\n");
        assertThat(KernelModules.scan(root).available()).containsExactlyInAnyOrder(KernelModules.RXE, KernelModules.SIW);
    }

    @Test
    void loadedModulesCountAndTreesWithoutIndexAreSearched() throws IOException {
        write("proc/sys/kernel/osrelease", "6.1.0\n");
        Files.createDirectories(root.resolve("sys/module/siw"));
        write("lib/modules/6.1.0/updates/rdma_rxe.ko.zst", "");
        KernelModules k = KernelModules.scan(root);
        assertThat(k.available()).containsExactlyInAnyOrder(KernelModules.SIW, KernelModules.RXE);
        assertThat(k.describe()).isEqualTo("rdma_rxe, siw for kernel 6.1.0");
    }

    @Test
    void withoutProcNothingIsKnownSoNothingIsLacking() {
        KernelModules k = KernelModules.scan(root);
        assertThat(k).isEqualTo(KernelModules.unknown());
        assertThat(k.release()).isEqualTo(Optional.empty());
        assertThat(k.lacks(KernelModules.RXE)).isFalse();
        assertThat(k.describe()).startsWith("unknown");
    }
}
