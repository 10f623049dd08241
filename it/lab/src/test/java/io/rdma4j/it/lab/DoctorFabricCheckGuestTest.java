package io.rdma4j.it.lab;

import io.rdma4j.core.doctor.ServingDoctor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * The fabric check as a user runs it, on the lab device: {@code java -jar rdma4j-doctor.jar --serve} in one guest
 * process and {@code --ping} in another, both on the verbs provider; the pinger's exit code and output (the provider
 * of each side, verified READ latency and bandwidth) are judged, and a ping to a port nobody serves exits 3.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class DoctorFabricCheckGuestTest {

    private final LabDevice device = LabDevice.current();
    private final List<Process> started = new ArrayList<>();

    /** rdma-core's runnable doctor jar, next to the rdma-core classes on this JVM's class path. */
    private static Path doctorJar() {
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            Path p = Path.of(entry);
            if (p.getParent() != null && p.getParent().endsWith(Path.of("rdma-core", "target"))) {
                Path jar = p.getParent().resolve("rdma4j-doctor.jar");
                if (Files.isRegularFile(jar)) {
                    return jar;
                }
            }
        }
        return fail("rdma-core/target/rdma4j-doctor.jar is not built: run ./mvnw -B -pl it/lab -am verify (rdma-core's"
                + " package phase builds it)");
    }

    private Process doctor(String... args) throws IOException {
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-jar", doctorJar().toString()));
        command.addAll(Arrays.asList(args));
        command.addAll(List.of("provider=verbs", "device=" + device.name(), "address=" + device.address(),
                "connect-timeout=30s", "operation-timeout=90s",
                // off loopback the server serves only peers that prove a secret (protected mode)
                "shared-secret=the lab doctor's secret, 16+ bytes"));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        started.add(p);
        return p;
    }

    private static String transport(LabDevice device) {
        return device.kind() == LabDevice.Kind.SIW ? "iWARP" : "RoCE v2";
    }

    @AfterEach
    void stop() throws InterruptedException {
        for (Process p : started) {
            p.destroyForcibly();
            p.waitFor(30, TimeUnit.SECONDS);
        }
    }

    @Test
    void pingBetweenTwoProcessesReportsVerbsOnBothSidesAndVerifiedReads() throws Exception {
        ServingDoctor server = ServingDoctor.await(doctor("--serve", device.address() + ":0"), device.address(),
                Duration.ofSeconds(180));
        assertThat(server.via()).isEqualTo("verbs (configured: " + device.name() + " port 1, " + transport(device) + ")");
        int port = server.port();

        Process ping = doctor("--ping", device.address() + ":" + port, "--latency-reads=200", "--bandwidth-seconds=1");
        String output = new String(ping.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(ping.waitFor(300, TimeUnit.SECONDS)).as("the ping finished").isTrue();
        assertThat(ping.exitValue()).as(output).isZero();
        String side = "verbs \\(configured: " + Pattern.quote(device.name()) + " port 1, " + transport(device) + "\\)";
        assertThat(output)
                .containsPattern("(?m)^this side: {3}\\S+, " + side + "$")
                .containsPattern("(?m)^server side: \\S+, " + side + "$")
                .containsPattern("(?m)^RDMA READ latency, 8 B, one at a time: median \\d+\\.\\d us, p99 \\d+\\.\\d us \\(200"
                        + " reads, all verified\\)$")
                .containsPattern("(?m)^RDMA READ bandwidth, 1024 KiB reads, 4 in flight: \\d+ MiB/s \\([1-9]\\d* MiB in"
                        + " \\d+\\.\\d s, all verified\\)$")
                .containsPattern("(?m)^OK: RDMA READ works between \\S+ and \\S+$")
                // the jar's manifest grants native access: no JVM flag, no warning
                .doesNotContain("restricted method");
        System.out.println(device.name() + " fabric check:\n" + output);

        String logged = server.nextLineStartingWith("ping from ", Duration.ofSeconds(30));
        assertThat(logged).as("the server logs the ping").isNotNull().contains(device.address())
                .endsWith("verbs (configured: " + device.name() + " port 1, " + transport(device) + ")");
    }

    @Test
    void pingToAPortNobodyServesExitsWithCannotConnect() throws Exception {
        Process ping = doctor("--ping", device.address() + ":7479");
        String output = new String(ping.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(ping.waitFor(120, TimeUnit.SECONDS)).as("the ping finished").isTrue();
        assertThat(ping.exitValue()).as(output).isEqualTo(3);
        assertThat(output).contains("cannot connect to ").contains("with the verbs provider")
                .contains("rdma4j-doctor.jar --serve");
    }
}
