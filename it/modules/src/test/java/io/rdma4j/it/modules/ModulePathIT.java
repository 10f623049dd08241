package io.rdma4j.it.modules;

import io.rdma4j.it.modules.AppModules.Compilation;
import io.rdma4j.it.modules.AppModules.Run;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * rdma4j's modules on the module path, each used by a small application module (src/test/modules) in a JVM of its
 * own: rdma-core's API works there and is all that an application may reach, native access is the native loader's
 * alone, the doctor still runs, and the Kafka module and the Spring Boot starter resolve and run. A wrong
 * {@code requires}, {@code exports}, {@code opens}, {@code uses} or {@code provides} fails one of these.
 */
class ModulePathIT {

    private static final String NATIVE_ACCESS = "--enable-native-access=io.rdma4j.nativeloader";
    /** A restricted call from a module without native access throws instead of warning. */
    private static final String DENY = "--illegal-native-access=deny";
    private static final List<String> API = List.of("io.rdma4j.core.RdmaTransport", "io.rdma4j.core.spi.RdmaProvider",
            "io.rdma4j.core.pool.RegisteredBufferPool", "io.rdma4j.core.metrics.TransportMetrics");
    private static final List<String> INSIDE_CORE = List.of("io.rdma4j.core.internal.DefaultTransportFactory",
            "io.rdma4j.core.tcp.TcpProvider", "io.rdma4j.core.verbs.VerbsProvider", "io.rdma4j.core.doctor.Doctor");
    private static final List<String> INSIDE_LOADER = List.of("io.rdma4j.nativeloader.bindings.RdmaBindings",
            "io.rdma4j.nativeloader.NativeLibraries");

    @Test
    void anApplicationModuleReadsOverTcpAndReachesOnlyTheApi() throws Exception {
        Compilation compilation = AppModules.compile("rdma4j.consumer");
        assertThat(compilation.errors()).isEmpty();
        String[] classes = Stream.of(API, INSIDE_CORE, INSIDE_LOADER).flatMap(List::stream).toArray(String[]::new);
        Run run = AppModules.run(List.of(NATIVE_ACCESS, DENY), "rdma4j.consumer", "rdma4j.consumer/rdma4j.consumer.Main",
                classes);
        assertThat(run.exitCode()).as(run.output()).isZero();
        assertThat(run.output()).as(run.output())
                .contains("READ 65536 bytes over tcp, first difference at -1")
                .contains("EXPORTS io.rdma4j.core [io.rdma4j.core, io.rdma4j.core.metrics, io.rdma4j.core.pool,"
                        + " io.rdma4j.core.spi]")
                .contains("EXPORTS io.rdma4j.nativeloader [io.rdma4j.nativeloader to [io.rdma4j.core],"
                        + " io.rdma4j.nativeloader.discovery to [io.rdma4j.core]]");
        for (String api : API) {
            assertThat(run.output()).as(run.output()).contains("ACCESSIBLE " + api + "\n");
        }
        for (String inside : INSIDE_CORE) {
            assertThat(run.output()).as(run.output()).contains("DENIED " + inside + ": access violation: class "
                    + inside + ", from class rdma4j.consumer.Main (module rdma4j.consumer); rdma4j.consumer reads"
                    + " io.rdma4j.core, which does not export " + packageOf(inside) + " to it\n");
        }
        for (String inside : INSIDE_LOADER) {
            assertThat(run.output()).as(run.output()).contains("DENIED " + inside + ": access violation: class "
                    + inside + ", from class rdma4j.consumer.Main (module rdma4j.consumer); rdma4j.consumer does not"
                    + " read io.rdma4j.nativeloader, which does not export " + packageOf(inside) + " to it\n");
        }
        // With deny, a restricted call from any module but the loader would have thrown: rdma-core makes none.
        assertThat(run.output()).as(run.output())
                .contains("NATIVE native libraries: libibverbs.so.1 and librdmacm.so.1 loaded; libibverbs sees")
                .doesNotContain("NATIVE DENIED").doesNotContain("restricted method");
    }

    @Test
    void withoutNativeAccessTheLoadersDowncallsAreRefused() throws Exception {
        assertThat(AppModules.compile("rdma4j.consumer").errors()).isEmpty();
        Run run = AppModules.run(List.of(DENY), "rdma4j.consumer", "rdma4j.consumer/rdma4j.consumer.Main");
        assertThat(run.exitCode()).as(run.output()).isZero();
        assertThat(run.output()).as("the tcp provider needs no native access; the probe does, in the loader")
                .contains("READ 65536 bytes over tcp, first difference at -1")
                .contains("NATIVE DENIED Illegal native access from module io.rdma4j.nativeloader");
    }

    @Test
    void javacRefusesEveryPackageOutsideTheApi() throws Exception {
        Compilation compilation = AppModules.compile("rdma4j.trespasser");
        assertThat(compilation.compiled()).isFalse();
        String errors = String.join("\n", compilation.errors());
        for (String pkg : List.of("io.rdma4j.core.internal", "io.rdma4j.core.tcp", "io.rdma4j.core.verbs",
                "io.rdma4j.core.doctor")) {
            assertThat(errors).as(errors).contains("package " + pkg + " is declared in module io.rdma4j.core,"
                    + " which does not export it");
        }
        assertThat(errors).as(errors)
                .contains("package io.rdma4j.nativeloader.bindings is declared in module io.rdma4j.nativeloader,"
                        + " which does not export it")
                .contains("package io.rdma4j.nativeloader is declared in module io.rdma4j.nativeloader, which does"
                        + " not export it to module rdma4j.trespasser")
                .contains("package io.rdma4j.nativeloader.discovery is declared in module io.rdma4j.nativeloader,"
                        + " which does not export it to module rdma4j.trespasser")
                .as("the exported API compiles").doesNotContain("io.rdma4j.core.RdmaTransport")
                .doesNotContain("package io.rdma4j.core is");
        assertThat(compilation.errors()).as(errors).hasSize(7);
    }

    @Test
    void theDoctorRunsFromRdmaCoresModule() throws Exception {
        Run run = AppModules.run(List.of(NATIVE_ACCESS, DENY), null, "io.rdma4j.core/io.rdma4j.core.doctor.Doctor",
                "--help");
        assertThat(run.exitCode()).as(run.output()).isZero();
        assertThat(run.output()).startsWith("usage: java -jar rdma4j-doctor.jar");
    }

    @Test
    void theKafkaModuleCreatesAnRdmaConsumer() throws Exception {
        assertThat(AppModules.compile("rdma4j.kafka.app").errors()).isEmpty();
        Run run = AppModules.run(List.of(NATIVE_ACCESS, DENY), "rdma4j.kafka.app", "rdma4j.kafka.app/rdma4j.kafka.app.Main");
        assertThat(run.exitCode()).as(run.output()).isZero();
        assertThat(run.output()).as(run.output()).contains("CONSUMER io.rdma4j.kafka.RdmaKafkaConsumer in io.rdma4j.kafka,"
                + " rdmaActive=true, clients in kafka.clients");
    }

    @Test
    void theNettyModuleEchoesOverRdmaChannels() throws Exception {
        assertThat(AppModules.compile("rdma4j.netty.app").errors()).isEmpty();
        Run run = AppModules.run(List.of(NATIVE_ACCESS, DENY), "rdma4j.netty.app", "rdma4j.netty.app/rdma4j.netty.app.Main");
        assertThat(run.exitCode()).as(run.output()).isZero();
        assertThat(run.output()).as(run.output()).contains("ECHO hello over io.rdma4j.netty.RdmaSocketChannel in"
                + " io.rdma4j.netty, Netty in io.netty.transport");
    }

    @Test
    void theSpringBootStarterPublishesAndReadsARegion() throws Exception {
        assertThat(AppModules.compile("rdma4j.boot.app").errors()).isEmpty();
        // Spring's jars are automatic modules, which cannot require the named modules they use (commons-logging,
        // JSpecify): a Spring application on the module path resolves the whole module path.
        Run run = AppModules.run(List.of(NATIVE_ACCESS, DENY, "--add-modules", "ALL-MODULE-PATH"), "rdma4j.boot.app",
                "rdma4j.boot.app/rdma4j.boot.app.BootApp");
        assertThat(run.exitCode()).as(run.output()).isZero();
        assertThat(run.output()).as(run.output())
                .contains("READ 65536 bytes over tcp, byte 12345 is 90")
                .contains("HEALTH UP");
    }

    private static String packageOf(String className) {
        return className.substring(0, className.lastIndexOf('.'));
    }
}
