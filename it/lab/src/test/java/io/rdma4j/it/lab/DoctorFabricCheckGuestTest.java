package io.rdma4j.it.lab;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
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
                "connect-timeout=30s", "operation-timeout=90s"));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        started.add(p);
        return p;
    }

    private static LinkedBlockingQueue<String> lines(Process p) {
        LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread.ofVirtual().start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    lines.add(line);
                }
            } catch (IOException ignored) {
                // the process was stopped
            }
        });
        return lines;
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
        Process server = doctor("--serve", device.address() + ":0");
        LinkedBlockingQueue<String> served = lines(server);
        Pattern serving = Pattern.compile("rdma4j doctor serving on " + Pattern.quote(device.address()) + ":(\\d+) via (.*)");
        StringBuilder seen = new StringBuilder();
        int port = -1;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
        while (port < 0 && System.nanoTime() < deadline) {
            String line = served.poll(1, TimeUnit.SECONDS);
            if (line == null) {
                if (!server.isAlive()) {
                    break;
                }
                continue;
            }
            seen.append(line).append('\n');
            Matcher m = serving.matcher(line);
            if (m.matches()) {
                port = Integer.parseInt(m.group(1));
                assertThat(m.group(2)).isEqualTo("verbs (configured: " + device.name() + " port 1, " + transport(device) + ")");
            }
        }
        if (port < 0) {
            fail("the --serve doctor did not start on " + device.name() + ":\n" + seen);
        }

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

        String logged = served.poll(30, TimeUnit.SECONDS);
        while (logged != null && !logged.startsWith("ping from ")) {
            logged = served.poll(30, TimeUnit.SECONDS);
        }
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
