package io.rdma4j.kafka.exporter;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** What the sidecar says, in one line, when it cannot start: {@code main} prints it and exits with status 2. */
class LogExporterMainTest {

    @TempDir
    Path logDirs;

    private String[] args(String... more) {
        String[] base = {"rdma.exporter.log.dirs=" + logDirs, "rdma.exporter.bootstrap.servers=127.0.0.1:1", "rdma.provider=tcp",
                "rdma.exporter.acls=false"};
        String[] out = java.util.Arrays.copyOf(base, base.length + more.length);
        System.arraycopy(more, 0, out, base.length, more.length);
        return out;
    }

    @Test
    void helpPrintsTheUsageAndStartsNothing() throws Exception {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        java.io.PrintStream original = System.out;
        System.setOut(new java.io.PrintStream(out, true, java.nio.charset.StandardCharsets.UTF_8));
        try {
            LogExporterMain.main(new String[] {"--help"});
        } finally {
            System.setOut(original);
        }
        assertThat(out.toString(java.nio.charset.StandardCharsets.UTF_8)).startsWith("usage: java --enable-native-access")
                .contains(ExporterArguments.USAGE);
    }

    @Test
    void aPortInUseSaysSoAndWhatToSet() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            assertThatThrownBy(() -> LogExporterMain.start(args("rdma.exporter.listen.address=127.0.0.1:" + taken.getLocalPort())))
                    .isInstanceOf(LogExporterMain.NotStarted.class)
                    .hasMessageContaining("cannot listen on /127.0.0.1:" + taken.getLocalPort())
                    .hasMessageContaining("another process")
                    .hasMessageContaining("set rdma.exporter.listen.address")
                    .satisfies(e -> assertThat(e.getStackTrace()).as("nothing to print but the line").isEmpty());
        }
    }

    @Test
    void anOptionItDoesNotTakeIsNamedWithTheUsage() {
        assertThatThrownBy(() -> LogExporterMain.start(args("--help")))
                .isInstanceOf(LogExporterMain.NotStarted.class)
                .hasMessageStartingWith("unknown option --help: arguments are key=value pairs");
        assertThatThrownBy(() -> LogExporterMain.start(args("--port=9299")))
                .isInstanceOf(LogExporterMain.NotStarted.class)
                .hasMessageStartingWith("unknown option --port=9299: arguments are key=value pairs");
    }

    @Test
    void aMisspeltExporterKeyIsRefusedWithTheKeysThereAre() {
        assertThatThrownBy(() -> LogExporterMain.start(args("rdma.exporter.listen.adress=127.0.0.1:9299")))
                .isInstanceOf(LogExporterMain.NotStarted.class)
                .hasMessageContaining("unknown key rdma.exporter.listen.adress")
                .hasMessageContaining(ExporterConfig.LISTEN);
    }

    @Test
    void aKeyOutsideRdmaIsRefused() {
        assertThatThrownBy(() -> LogExporterMain.start(args("log.dirs=/var/lib/kafka")))
                .isInstanceOf(LogExporterMain.NotStarted.class)
                .hasMessageContaining("unknown key log.dirs: exporter keys start with rdma.exporter.");
    }

    @Test
    void aMissingPropertiesFileIsNamed() {
        assertThatThrownBy(() -> LogExporterMain.start(args("no-such-exporter.properties")))
                .isInstanceOf(LogExporterMain.NotStarted.class)
                .hasMessageStartingWith("no file no-such-exporter.properties: arguments are");
    }

    @Test
    void aMalformedNumberNamesItsKey() {
        assertThatThrownBy(() -> LogExporterMain.start(args("rdma.exporter.watermark.interval.ms=fast")))
                .isInstanceOf(LogExporterMain.NotStarted.class)
                .hasMessage(ExporterConfig.INTERVAL + " needs a number of milliseconds, got 'fast'");
    }

    @Test
    void aMisspeltTransportKeyIsRefused() {
        assertThatThrownBy(() -> LogExporterMain.start(args("rdma.provder=tcp")))
                .isInstanceOf(LogExporterMain.NotStarted.class)
                .hasMessageContaining("unknown key rdma.provder");
    }
}
