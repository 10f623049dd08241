package io.rdma4j.core.doctor;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The packaged rdma4j-doctor.jar as a user runs it: on an older java it says in one line which JDK it needs and
 * which it found, and exits non-zero; on this JDK it is the doctor.
 */
class DoctorJarIT {

    /** The machines' default java (OpenJDK 17); RDMA4J_OLD_JAVA names another one older than 25. */
    private static final Path OLD_JAVA = Path.of(System.getenv().getOrDefault("RDMA4J_OLD_JAVA",
            "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"));
    private static final Path JAR = Path.of("target", "rdma4j-doctor.jar");

    private record Result(int code, String output) {
    }

    private static Result run(Path java, String... args) throws IOException, InterruptedException {
        List<String> command = new java.util.ArrayList<>(List.of(java.toString(), "-jar", JAR.toString()));
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("the doctor finished").isTrue();
        return new Result(p.exitValue(), output);
    }

    @Test
    void anOlderJavaIsToldWhichJdkToUseInOneLine() throws Exception {
        assertThat(OLD_JAVA).as("a java older than 25 to run the jar with: install OpenJDK 17 (the machines' default"
                + " java, e.g. apt-get install openjdk-17-jdk-headless) or set RDMA4J_OLD_JAVA to one").isExecutable();
        Result r = run(OLD_JAVA);
        assertThat(r.code()).as(r.output()).isNotZero();
        assertThat(r.output().lines().toList()).as(r.output()).singleElement().asString()
                .startsWith("rdma4j-doctor needs Java 25 or later; this is Java ")
                .contains(" at " + OLD_JAVA.getParent().getParent())
                .contains("Run it with a JDK 25 java")
                .doesNotContain("UnsupportedClassVersionError");
    }

    @Test
    void onThisJdkTheLauncherRunsTheDoctor() throws Exception {
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        Result help = run(java, "--help");
        assertThat(help.code()).as(help.output()).isZero();
        assertThat(help.output()).startsWith("usage: java -jar rdma4j-doctor.jar");
        Result bad = run(java, "--bogus");
        assertThat(bad.code()).as("the doctor's own exit code comes through").isEqualTo(ExitCode.BAD_ARGUMENTS);
    }
}
