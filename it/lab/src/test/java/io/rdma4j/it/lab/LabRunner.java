package io.rdma4j.it.lab;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Host side of the soft-RDMA lab: boots the guest once through {@code it/lab/rdma-lab.sh run} and, inside
 * it, runs the {@code *GuestTest} classes with the JUnit console launcher in one JVM per lab device.
 * The guest sees the host "/" read-only, so the test classpath is passed as host paths; results come back
 * through the read-write share directory.
 *
 * <p>Configured by system properties that the lab modules' poms give surefire: {@code rdma4j.lab.script},
 * {@code rdma4j.lab.classpathFile} (written by dependency:build-classpath), {@code rdma4j.lab.testClasses},
 * {@code rdma4j.lab.classes}, {@code rdma4j.lab.resultsDir}; optional {@code rdma4j.lab.include} (regex of
 * guest test class names, default {@value #DEFAULT_INCLUDE}: every guest test class but the benchmark, which
 * {@code VerbsBenchmarkLabTest} runs in the {@code bench} profile), {@code rdma4j.lab.devices} (comma-separated
 * device names, default all of {@link LabDevice#ALL}), {@code rdma4j.lab.vmMemory} (guest memory, as
 * {@code RDMA_LAB_VM_MEM}), {@code rdma4j.lab.timeoutSeconds}, {@code rdma4j.lab.guestEnv} (comma-separated
 * {@code NAME=value} exported to the guest JVMs, e.g. Spark's {@code SPARK_HOME}),
 * {@code rdma4j.lab.guestJvmOptions} (whitespace-separated extra options of the guest JVMs) and
 * {@code rdma4j.lab.parallelDevices} (default {@code true}: the devices' guest JVMs run at the same time; the
 * benchmark always runs them one after the other). Other modules (the Spark and Kafka lab
 * flows) use it through this module's test-jar, each with its own classpath.
 */
public final class LabRunner {

    /** Every guest test class except {@link #BENCHMARK_INCLUDE}'s: the correctness suite that {@code verify} runs. */
    public static final String DEFAULT_INCLUDE = ".*(?<!Benchmark)GuestTest";
    /**
     * Guest classes the default suite runs on one device only, by simple name: what they add beyond the contract suite
     * is not specific to the device, so running them on both cost the test command about a minute and a half and
     * showed nothing new. The secret variant of the contract suite runs on rxe0 (VerbsAuthGuestTest checks the
     * shared secret's handshake on both devices); the doctor's two-process check runs on siw0, the device whose
     * connections must go through rdma_cm. Netty's suite classes run on rxe0: they check the Netty transport's channel
     * over a verbs transport, which the contract suite checks on both devices.
     */
    static final Map<String, String> DEFAULT_ONE_DEVICE_ONLY = Map.of(
            "SecretVerbsContractGuestTest", "rxe0",
            "DoctorFabricCheckGuestTest", "siw0",
            "NettyEchoGuestTest", "rxe0",
            "NettyHalfClosedGuestTest", "rxe0",
            "NettyConditionalWritabilityGuestTest", "rxe0",
            "NettyGatheringWriteGuestTest", "rxe0",
            "NettyRstGuestTest", "rxe0");
    /**
     * A module's benchmark guest classes (the verbs benchmark against perftest, Netty's and Kafka's over rxe0): only
     * the bench profile runs them, each from a lab test of its own.
     */
    public static final String BENCHMARK_INCLUDE = ".*BenchmarkGuestTest";
    public static final String NOT_SET_UP = "soft-RDMA lab not set up: run it/lab/rdma-lab.sh setup (as root)";
    private static final Duration SETUP_TIMEOUT = Duration.ofMinutes(30);

    private static final String CONSOLE_LAUNCHER = "org.junit.platform.console.ConsoleLauncher";
    private static final Duration STATUS_TIMEOUT = Duration.ofSeconds(60);

    private final Path script;
    private final List<Path> classpath;
    private final Path testClasses;
    private final Path resultsDir;
    private final String include;
    private final List<LabDevice> devices;
    private final String vmMemory;
    private final Duration guestTimeout;
    private final List<String> guestEnv;
    private final List<String> guestJvmOptions;
    private final boolean parallelDevices;

    private LabRunner(Path script, List<Path> classpath, Path testClasses, Path resultsDir, String include,
            List<LabDevice> devices, String vmMemory, Duration guestTimeout, List<String> guestEnv,
            List<String> guestJvmOptions, boolean parallelDevices) {
        this.script = script;
        this.classpath = classpath;
        this.testClasses = testClasses;
        this.resultsDir = resultsDir;
        this.include = include;
        this.devices = devices;
        this.vmMemory = vmMemory;
        this.guestTimeout = guestTimeout;
        this.guestEnv = guestEnv;
        this.guestJvmOptions = guestJvmOptions;
        this.parallelDevices = parallelDevices;
    }

    /** Configured by the system properties, running the guest test classes {@code rdma4j.lab.include} names. */
    public static LabRunner fromSystemProperties() throws IOException {
        return fromSystemProperties(System.getProperty("rdma4j.lab.include", DEFAULT_INCLUDE));
    }

    /** Configured by the system properties, running the guest test classes whose names match {@code include}. */
    public static LabRunner fromSystemProperties(String include) throws IOException {
        Path testClasses = Path.of(required("rdma4j.lab.testClasses"));
        Path classes = Path.of(required("rdma4j.lab.classes"));
        Path classpathFile = Path.of(required("rdma4j.lab.classpathFile"));
        if (!Files.isRegularFile(classpathFile)) {
            throw new IllegalStateException(classpathFile + " is missing: build the it module with Maven "
                    + "(dependency:build-classpath writes it in generate-test-resources)");
        }
        List<Path> classpath = new ArrayList<>(List.of(testClasses, classes));
        for (String entry : Files.readString(classpathFile).strip().split(File.pathSeparator)) {
            if (!entry.isBlank()) {
                classpath.add(Path.of(entry));
            }
        }
        return new LabRunner(Path.of(required("rdma4j.lab.script")), List.copyOf(classpath), testClasses,
                Path.of(required("rdma4j.lab.resultsDir")), include,
                devices(System.getProperty("rdma4j.lab.devices", "")),
                System.getProperty("rdma4j.lab.vmMemory", ""),
                // the verbs correctness classes take 3-4 min per boot on a 2-core host, the benchmark 20 more
                Duration.ofSeconds(Long.getLong("rdma4j.lab.timeoutSeconds", 3600)),
                guestEnv(System.getProperty("rdma4j.lab.guestEnv", "")),
                words(System.getProperty("rdma4j.lab.guestJvmOptions", "")),
                // A benchmark pins both sides to the guest's CPUs: a second device's JVM would disturb it.
                !include.endsWith("BenchmarkGuestTest")
                        && Boolean.parseBoolean(System.getProperty("rdma4j.lab.parallelDevices", "true")));
    }

    private static List<String> guestEnv(String entries) {
        List<String> env = new ArrayList<>();
        for (String entry : entries.split(",")) {
            if (entry.isBlank()) {
                continue;
            }
            if (!entry.strip().matches("[A-Za-z_][A-Za-z0-9_]*=.*")) {
                throw new IllegalArgumentException("rdma4j.lab.guestEnv takes comma-separated NAME=value entries, got '"
                        + entry.strip() + "'");
            }
            env.add(entry.strip());
        }
        return List.copyOf(env);
    }

    private static List<String> words(String options) {
        return options.isBlank() ? List.of() : List.of(options.strip().split("\\s+"));
    }

    private static List<LabDevice> devices(String names) {
        if (names.isBlank()) {
            return LabDevice.ALL;
        }
        List<LabDevice> chosen = new ArrayList<>();
        for (String name : names.split(",")) {
            chosen.add(LabDevice.ALL.stream().filter(d -> d.name().equals(name.strip())).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("rdma4j.lab.devices names '" + name.strip()
                            + "', which is not a lab device; the lab has " + LabDevice.ALL)));
        }
        return List.copyOf(chosen);
    }

    /**
     * Sets the lab up when it is missing ({@code rdma-lab.sh ensure}: as root, else through {@code sudo -n}), so
     * that the build is the whole set-up; fails with the script's output, which names the command to run as root
     * when neither works.
     */
    public void ensureSetUp() throws IOException, InterruptedException {
        if (!Files.isExecutable(script)) {
            throw new AssertionError(NOT_SET_UP + "\n  " + script + " is missing or not executable");
        }
        Path log = Files.createTempFile("rdma-lab-ensure", ".log");
        try {
            long start = System.nanoTime();
            int rc = execute(List.of(script.toString(), "ensure"), log, SETUP_TIMEOUT, null, "");
            String output = Files.readString(log).strip();
            System.out.println("[LabRunner] rdma-lab.sh ensure: exit status " + rc + " after "
                    + Duration.ofNanos(System.nanoTime() - start).toSeconds() + " s\n" + output);
            if (rc != 0) {
                throw new AssertionError("the soft-RDMA lab could not be set up (rdma-lab.sh ensure, exit status "
                        + rc + "):\n" + output);
            }
        } finally {
            Files.deleteIfExists(log);
        }
    }

    /** Why the lab cannot run here ({@code rdma-lab.sh status}), or empty when it can. */
    public Optional<String> notReadyReason() throws IOException, InterruptedException {
        if (!Files.isExecutable(script)) {
            return Optional.of(script + " is missing or not executable");
        }
        Path log = Files.createTempFile("rdma-lab-status", ".log");
        try {
            int rc = execute(List.of(script.toString(), "status"), log, STATUS_TIMEOUT, null, "");
            return rc == 0 ? Optional.empty() : Optional.of(Files.readString(log).strip());
        } finally {
            Files.deleteIfExists(log);
        }
    }

    /**
     * What every lab host test does: sets the lab up when it is missing, fails (never skips) when it still cannot
     * run here, boots the guest suite,
     * and requires that every chosen device ran tests and none failed, errored or was skipped. Soft devices
     * are occasionally flaky (seen with rping on rxe), so one whole new boot is allowed and logged; the
     * assertions themselves never retry.
     */
    public void requireGuestSuitePasses() throws IOException, InterruptedException {
        ensureSetUp();
        Optional<String> notReady = notReadyReason();
        if (notReady.isPresent()) {
            throw new AssertionError(NOT_SET_UP + "\n  " + notReady.get());
        }
        String runName = LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss"));
        GuestRun run = runGuestSuite(runName + "-1");
        System.out.println(run.describe());
        String firstFailure = "";
        if (!run.passed()) {
            firstFailure = "first attempt (retried once):\n" + run.describe();
            System.err.println("[LabRunner] guest run failed, booting once more:\n" + run.describe());
            run = runGuestSuite(runName + "-2");
            System.out.println(run.describe());
        }
        if (!run.passed()) {
            throw new AssertionError("the guest suite must run tests and pass on every chosen lab device "
                    + devices.stream().map(LabDevice::name).toList() + "\n" + firstFailure + run.describe());
        }
    }

    /** Boots the guest once and runs the guest suite on each chosen device; {@code runName} names its results. */
    public GuestRun runGuestSuite(String runName) throws IOException, InterruptedException {
        Path runDir = resultsDir.resolve(runName).toAbsolutePath();
        Files.createDirectories(runDir);
        Path guestScript = writeGuestScript(runDir);
        Path consoleLog = runDir.resolve("console.log");
        long start = System.nanoTime();
        int rc = execute(List.of(script.toString(), "run", guestScript.toString()), consoleLog,
                guestTimeout.plusSeconds(60), runDir, vmMemory);
        Duration took = Duration.ofNanos(System.nanoTime() - start);
        List<GuestReport> reports = new ArrayList<>();
        for (LabDevice device : devices) {
            reports.add(GuestReport.read(device.name(), runDir.resolve("reports").resolve(device.name())));
        }
        return new GuestRun(rc, List.copyOf(reports), consoleLog, took);
    }

    /**
     * The guest script: one JVM per device, each writing its JUnit XML reports under the share, all at once
     * unless {@code rdma4j.lab.parallelDevices=false} or the benchmark runs. It exits non-zero when any JVM did.
     */
    private Path writeGuestScript(Path runDir) throws IOException {
        Path javaLauncher = Path.of(System.getProperty("java.home"), "bin", "java");
        // An argument file keeps the long host classpath out of the kernel and shell command lines.
        Path argFile = runDir.resolve("guest-java.args");
        Files.writeString(argFile, "-cp\n" + quote(String.join(File.pathSeparator,
                classpath.stream().map(Path::toString).toList())) + "\n");
        StringBuilder sh = new StringBuilder("""
                #!/bin/bash
                # Generated by io.rdma4j.it.lab.LabRunner: runs the guest suite inside the soft-RDMA lab.
                # Re-run by hand: it/lab/rdma-lab.sh run <this file>   (as root; results land beside it)
                set -u
                status=0
                """);
        for (String entry : guestEnv) {
            int eq = entry.indexOf('=');
            sh.append("export ").append(entry, 0, eq).append('=').append(quote(entry.substring(eq + 1))).append('\n');
        }
        for (LabDevice device : devices) {
            Path reports = runDir.resolve("reports").resolve(device.name());
            List<String> command = new ArrayList<>(List.of(javaLauncher.toString(),
                    "--enable-native-access=ALL-UNNAMED",
                    // C2 compilations cost more than they pay back in a short run on an emulated CPU.
                    "-XX:TieredStopAtLevel=1",
                    // A JVM that dies leaves its report with the results, not in the guest's tmpfs that goes with it.
                    "-XX:ErrorFile=" + runDir.resolve("hs_err_" + device.name() + "_pid%p.log"), "@" + argFile));
            command.addAll(guestJvmOptions);
            command.addAll(device.systemProperties());
            command.addAll(List.of(CONSOLE_LAUNCHER, "execute", "--disable-banner", "--disable-ansi-colors",
                    "--details=tree", "--fail-if-no-tests", "--reports-dir=" + reports,
                    "--scan-classpath=" + testClasses, "--include-classname=" + include));
            if (include.equals(DEFAULT_INCLUDE)) {
                DEFAULT_ONE_DEVICE_ONLY.forEach((simpleName, only) -> {
                    if (!only.equals(device.name())) {
                        command.add("--exclude-classname=.*\\." + simpleName);
                    }
                });
            }
            sh.append("""
                    suite_%1$s() {
                      echo "LAB-SUITE: %1$s started at $(cut -d' ' -f1 /proc/uptime) s guest uptime"
                      %2$s
                      rc=$?; echo "LAB-SUITE: %1$s exit status $rc at $(cut -d' ' -f1 /proc/uptime) s guest uptime"
                      return $rc
                    }
                    """.formatted(device.name(), String.join(" ", command.stream().map(LabRunner::quote).toList())));
        }
        if (parallelDevices) {
            // The devices are independent: their JVMs share the guest's two vCPUs, each logging to its own file,
            // which the console gets whole once both are done.
            for (LabDevice device : devices) {
                sh.append("suite_%1$s > %2$s 2>&1 & pid_%1$s=$!\n".formatted(device.name(),
                        quote(runDir.resolve(device.name() + ".log").toString())));
            }
            for (LabDevice device : devices) {
                sh.append("wait $pid_%1$s; rc=$?; cat %2$s; [ $rc = 0 ] || status=$rc\n".formatted(device.name(),
                        quote(runDir.resolve(device.name() + ".log").toString())));
            }
        } else {
            for (LabDevice device : devices) {
                sh.append("suite_%1$s || status=$?\n".formatted(device.name()));
            }
        }
        sh.append("exit $status\n");
        Path guestScript = runDir.resolve("guest-suite.sh");
        Files.writeString(guestScript, sh, StandardCharsets.UTF_8);
        Files.setPosixFilePermissions(guestScript, PosixFilePermissions.fromString("rwxr-xr-x"));
        return guestScript;
    }

    private static int execute(List<String> command, Path log, Duration timeout, Path share, String vmMemory)
            throws IOException, InterruptedException {
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(log.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        if (share != null) {
            builder.environment().put("RDMA_LAB_SHARE", share.toString());
            builder.environment().put("RDMA_LAB_TIMEOUT", Long.toString(timeout.minusSeconds(60).toSeconds()));
        }
        if (!vmMemory.isBlank()) {
            builder.environment().put("RDMA_LAB_VM_MEM", vmMemory);
        }
        Process process = builder.start();
        if (!process.waitFor(timeout.toSeconds(), TimeUnit.SECONDS)) {
            // QEMU runs under `timeout` in rdma-lab.sh; kill the whole tree so no VM outlives the test.
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly().waitFor();
            Files.writeString(log, "\n[LabRunner] killed after " + timeout.toSeconds() + " s\n",
                    StandardOpenOption.APPEND);
            return 124;
        }
        return process.exitValue();
    }

    private static String quote(String s) {
        return "'" + s.replace("'", "'\\''") + "'";
    }

    private static String required(String property) {
        String value = System.getProperty(property);
        if (value == null || value.isBlank()) {
            throw new IllegalStateException("system property " + property
                    + " is not set: run this test through Maven (it/pom.xml configures surefire)");
        }
        return value;
    }

    /** One boot of the guest: rdma-lab.sh's exit status and one report per device. */
    public record GuestRun(int exitStatus, List<GuestReport> reports, Path consoleLog, Duration took) {

        public boolean passed() {
            return exitStatus == 0 && reports.stream().allMatch(GuestReport::passed);
        }

        public String describe() throws IOException {
            StringBuilder s = new StringBuilder("guest run: rdma-lab.sh exit status " + exitStatus + " after "
                    + took.toSeconds() + " s; console log " + consoleLog + "\n");
            for (GuestReport report : reports) {
                s.append("  ").append(report.summary()).append('\n');
                report.problems().forEach(p -> s.append("    ").append(p.replace("\n", "\n      ")).append('\n'));
            }
            if (!passed() && Files.exists(consoleLog)) {
                // The serial console carries firmware escape bytes: decode leniently.
                List<String> lines = new String(Files.readAllBytes(consoleLog), StandardCharsets.UTF_8).lines().toList();
                s.append("  last console lines:\n");
                lines.subList(Math.max(0, lines.size() - 40), lines.size())
                        .forEach(l -> s.append("    | ").append(l).append('\n'));
            }
            return s.toString();
        }
    }
}
