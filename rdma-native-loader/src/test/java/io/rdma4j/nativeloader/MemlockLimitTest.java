package io.rdma4j.nativeloader;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class MemlockLimitTest {

    static Path resource(String name) throws Exception {
        return Path.of(MemlockLimitTest.class.getResource("/limits/" + name).toURI());
    }

    @Test
    void readsEightMibLimitAndAdvisesRaisingIt() throws Exception {
        MemlockLimit l = MemlockLimit.read(resource("proc-self-limits-8mib"));
        assertThat(l.softBytes()).isEqualTo(8L << 20);
        assertThat(l.hardBytes()).isEqualTo(8L << 20);
        assertThat(l.unlimited()).isFalse();
        assertThat(l.advice()).hasValueSatisfying(a -> assertThat(a)
                .startsWith("memlock 8 MiB is too low for registering large regions")
                .contains("ulimit -l unlimited").contains("LimitMEMLOCK=infinity")
                .doesNotContain("without root"));
        assertThat(l).hasToString("memlock soft 8 MiB, hard 8 MiB");
    }

    @Test
    void unlimitedNeedsNoAdvice() throws Exception {
        MemlockLimit l = MemlockLimit.read(resource("proc-self-limits-unlimited"));
        assertThat(l.unlimited()).isTrue();
        assertThat(l.hardBytes()).isEqualTo(MemlockLimit.UNLIMITED);
        assertThat(l.advice()).isEmpty();
    }

    @Test
    void lowSoftLimitWithHighHardLimitSaysItCanBeRaisedWithoutRoot() {
        MemlockLimit l = MemlockLimit.parse(List.of("Max locked memory         65536                unlimited            bytes"));
        assertThat(l.softBytes()).isEqualTo(65536);
        assertThat(l.advice()).hasValueSatisfying(a -> assertThat(a).contains("memlock 64 KiB").contains("without root"));
    }

    @Test
    void largeFiniteLimitIsEnough() {
        assertThat(new MemlockLimit(2L << 30, 2L << 30).advice()).isEmpty();
        assertThat(new MemlockLimit((1L << 30) - 1, 2L << 30).advice()).isPresent();
    }

    @Test
    void formatsSizes() {
        assertThat(MemlockLimit.format(MemlockLimit.UNLIMITED)).isEqualTo("unlimited");
        assertThat(MemlockLimit.format(3L << 30)).isEqualTo("3 GiB");
        assertThat(MemlockLimit.format(100)).isEqualTo("100 B");
        assertThat(MemlockLimit.format(1536)).isEqualTo("1536 B");
        assertThat(MemlockLimit.format(2048)).isEqualTo("2 KiB");
    }

    @Test
    void missingRowIsAnError() {
        assertThatThrownBy(() -> MemlockLimit.parse(List.of("Max open files 1024 4096 files")))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void readsThisProcessOnLinux() {
        // the build hosts are Linux: /proc/self/limits exists and has the row
        assertThat(MemlockLimit.current()).isPresent();
    }
}
