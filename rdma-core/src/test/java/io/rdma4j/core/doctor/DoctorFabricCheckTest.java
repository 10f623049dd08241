package io.rdma4j.core.doctor;

import io.rdma4j.core.ChildClassPath;
import io.rdma4j.core.ProviderSelection;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * The doctor's fabric check as a user runs it: a {@code --serve} process and {@code --ping} processes on the tcp
 * provider, judged by their output and exit codes; the argument and lookup failures run in this JVM.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class DoctorFabricCheckTest {

    private static final String SECRET = "fabric-check-secret-0123";

    private final List<Process> servers = new ArrayList<>();

    private record Result(int code, String output) {
    }

    private static ProcessBuilder doctor(String... args) {
        String java = ProcessHandle.current().info().command().orElseThrow(() -> new AssertionError("cannot find the java binary"));
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Xmx256m",
                "-XX:TieredStopAtLevel=1", "-cp", ChildClassPath.ofThisTestRun(), Doctor.class.getName()));
        command.addAll(List.of(args));
        return new ProcessBuilder(command).redirectErrorStream(true);
    }

    private ServingDoctor serve(String... options) throws Exception {
        return serveOn("127.0.0.1:0", "127.0.0.1", options);
    }

    /** A {@code --serve TARGET} doctor that announces it serves on {@code host}. */
    private ServingDoctor serveOn(String target, String host, String... options) throws Exception {
        List<String> args = new ArrayList<>(List.of("--serve", target));
        args.addAll(List.of(options));
        Process p = doctor(args.toArray(String[]::new)).start();
        servers.add(p);
        ServingDoctor server = ServingDoctor.await(p, host, Duration.ofSeconds(60));
        assertThat(server.via()).isEqualTo("tcp (configured: software emulation over TCP)");
        return server;
    }

    private static Result ping(int port, String... options) throws Exception {
        List<String> args = new ArrayList<>(List.of("--ping", "127.0.0.1:" + port, "--latency-reads=200",
                "--bandwidth-seconds=0.5"));
        args.addAll(List.of(options));
        Process p = doctor(args.toArray(String[]::new)).start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("the ping finished").isTrue();
        return new Result(p.exitValue(), output);
    }

    private static Result inProcess(String... args) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PrintStream both = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        int code = Doctor.run(args, both, both);
        return new Result(code, bytes.toString(StandardCharsets.UTF_8));
    }

    private static int closedPort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @AfterEach
    void stopServers() throws Exception {
        for (Process p : servers) {
            p.destroy();
            assertThat(p.waitFor(30, TimeUnit.SECONDS)).as("the --serve doctor stops on SIGTERM").isTrue();
        }
    }

    @Test
    void pingPrintsBothProvidersAndVerifiedLatencyAndBandwidth() throws Exception {
        ServingDoctor server = serve("provider=tcp");
        Result r = ping(server.port(), "provider=tcp");
        assertThat(r.code()).as(r.output()).isEqualTo(ExitCode.OK);
        String kind = Pattern.quote("one-sided READ emulated over TCP (tcp provider, not RDMA)");
        assertThat(r.output())
                .contains("this side:   ").contains("server side: ")
                .containsPattern("(?m)^this side: {3}\\S+, tcp \\(configured: software emulation over TCP\\)$")
                .containsPattern("(?m)^server side: \\S+, tcp \\(configured: software emulation over TCP\\)$")
                .containsPattern("(?m)^" + kind + " latency, 8 B, one at a time: median \\d+\\.\\d us, p99 \\d+\\.\\d us"
                        + " \\(200 reads, all verified\\)$")
                .containsPattern("(?m)^" + kind + " bandwidth, 1024 KiB reads, 4 in flight: \\d+ MiB/s \\(\\d+ MiB in"
                        + " 0\\.\\d s, all verified\\)$")
                .containsPattern("(?m)^OK: " + kind + " works between \\S+ and \\S+$")
                .doesNotContain("RDMA READ");
        Matcher bandwidth = Pattern.compile("\\((\\d+) MiB in").matcher(r.output());
        assertThat(bandwidth.find()).isTrue();
        assertThat(Long.parseLong(bandwidth.group(1))).as("MiB read in the bandwidth phase").isPositive();
        String served = server.nextLineStartingWith("ping from ", Duration.ofSeconds(10));
        assertThat(served).as("the server logs the ping").isNotNull()
                .startsWith("ping from ").endsWith("tcp (configured: software emulation over TCP)");
    }

    @Test
    void autoSidesDoNotPointToTheDoctorFromTheDoctor() throws Exception {
        // Where auto falls back to tcp, a transport's summary ends with the hint to run the doctor.
        Process p = doctor("--serve", "127.0.0.1:0").start();
        servers.add(p);
        ServingDoctor server = ServingDoctor.await(p, "127.0.0.1", Duration.ofSeconds(60));
        Result r = ping(server.port());
        assertThat(r.code()).as(r.output()).isEqualTo(ExitCode.OK);
        assertThat(r.output()).contains("this side:   ").contains("server side: ").doesNotContain(ProviderSelection.DOCTOR_HINT);
        assertThat(server.via()).doesNotContain(ProviderSelection.DOCTOR_HINT);
        assertThat(server.nextLineStartingWith("ping from ", Duration.ofSeconds(10))).isNotNull()
                .doesNotContain(ProviderSelection.DOCTOR_HINT);
    }

    @Test
    void wrongOrMissingSecretExitsWithAuthenticationFailed() throws Exception {
        ServingDoctor server = serve("provider=tcp", "shared-secret=" + SECRET);
        Result wrong = ping(server.port(), "provider=tcp", "shared-secret=not-the-fabric-secret-42");
        assertThat(wrong.code()).as(wrong.output()).isEqualTo(ExitCode.AUTHENTICATION_FAILED);
        assertThat(wrong.output()).contains("authentication with ").contains("configure the same shared-secret");
        Result missing = ping(server.port(), "provider=tcp");
        assertThat(missing.code()).as(missing.output()).isEqualTo(ExitCode.AUTHENTICATION_FAILED);
        assertThat(missing.output()).contains("shared secret");
        Result right = ping(server.port(), "provider=tcp", "shared-secret=" + SECRET);
        assertThat(right.code()).as(right.output()).isEqualTo(ExitCode.OK);
    }

    @Test
    void serveWithoutAnAddressStaysOnLoopbackAndOffLoopbackNeedsAuthentication() throws Exception {
        ServingDoctor local = serveOn(":0", "127.0.0.1", "provider=tcp");
        assertThat(ping(local.port(), "provider=tcp").code()).isEqualTo(ExitCode.OK);

        Result refused = inProcess("--serve", "0.0.0.0:0", "provider=tcp");
        assertThat(refused.code()).as(refused.output()).isEqualTo(ExitCode.CANNOT_RUN_HERE);
        assertThat(refused.output()).contains("will not listen on 0.0.0.0").contains("shared-secret")
                .contains("allow-unauthenticated=true").doesNotContain("is the address this host's");

        ServingDoctor everywhere = serveOn("0.0.0.0:0", "0:0:0:0:0:0:0:0", // the JDK binds the wildcard dual-stack
                "provider=tcp", "shared-secret=" + SECRET);
        Result member = ping(everywhere.port(), "provider=tcp", "shared-secret=" + SECRET);
        assertThat(member.code()).as(member.output()).isEqualTo(ExitCode.OK);
        Result stranger = ping(everywhere.port(), "provider=tcp");
        assertThat(stranger.code()).as(stranger.output()).isEqualTo(ExitCode.AUTHENTICATION_FAILED);
    }

    @Test
    void unreachableServerExitsWithCannotConnect() {
        Result refused = inProcess("--ping", "127.0.0.1:" + closedPort(), "provider=tcp");
        assertThat(refused.code()).as(refused.output()).isEqualTo(ExitCode.CANNOT_CONNECT);
        assertThat(refused.output()).contains("cannot connect to ").contains("--serve` runs there");
        Result unknown = inProcess("--ping", "no-such-host.invalid", "provider=tcp");
        assertThat(unknown.code()).as(unknown.output()).isEqualTo(ExitCode.CANNOT_CONNECT);
        assertThat(unknown.output()).contains("cannot resolve host 'no-such-host.invalid'");
    }

    @Test
    void badArgumentsExitWithTwoAndSayWhatIsWrong() {
        record Case(String[] args, String says) {
        }
        List<Case> cases = List.of(
                new Case(new String[] {"--ping"}, "--ping needs the server"),
                new Case(new String[] {"--ping", "host:99999"}, "the port must be a number from 0 to 65535"),
                new Case(new String[] {"--ping", "[fd00::5"}, "needs a closing ]"),
                new Case(new String[] {"--serve", "--ping", "h"}, "give one of --serve and --ping"),
                new Case(new String[] {"provder=tcp"}, "unknown transport option 'provder'"),
                new Case(new String[] {"--latency-reads=0", "--ping", "h"}, "give a whole number from 1"),
                new Case(new String[] {"--frobnicate"}, "unknown option '--frobnicate'"),
                new Case(new String[] {"mlx5_0"}, "arguments are key=value transport options"),
                new Case(new String[] {"connect-timeout=soon"}, "connect-timeout"));
        for (Case c : cases) {
            Result r = inProcess(c.args());
            assertThat(r.code()).as(String.join(" ", c.args()) + "\n" + r.output()).isEqualTo(ExitCode.BAD_ARGUMENTS);
            assertThat(r.output()).as(String.join(" ", c.args())).contains(c.says());
        }
    }

    @Test
    void providerThatCannotRunHereExitsWithSix() {
        // a device no host has: verbs cannot run, with or without an RDMA NIC
        Result r = inProcess("--ping", "127.0.0.1:" + closedPort(), "provider=verbs", "device=rdma4j-no-such-device0");
        assertThat(r.code()).as(r.output()).isEqualTo(ExitCode.CANNOT_RUN_HERE);
        assertThat(r.output()).contains("cannot open the transport here");
        Result report = inProcess("provider=verbs", "device=rdma4j-no-such-device0");
        assertThat(report.code()).isEqualTo(ExitCode.CANNOT_RUN_HERE);
        assertThat(report.output()).contains("provider=verbs chooses nothing");
    }

    @Test
    void reportOnTcpExitsZeroAndHelpPrintsTheExitCodes() {
        Result report = inProcess("provider=tcp", "--exit");
        assertThat(report.code()).as(report.output()).isEqualTo(ExitCode.OK);
        assertThat(report.output()).contains("provider=tcp chooses tcp: configured: software emulation over TCP");
        Result help = inProcess("--help");
        assertThat(help.code()).isEqualTo(ExitCode.OK);
        assertThat(help.output()).contains("--serve").contains("--ping")
                .contains("0 ok, 1 unexpected failure, 2 bad arguments, 3 cannot connect, 4 authentication failed");
    }
}
