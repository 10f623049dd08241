package io.rdma4j.it.adoption;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipInputStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A user's new project, built as the README's "Use it from your project" says: a Spring Boot application that imports
 * rdma4j's BOM and uses the starter and the Kafka module. Its Maven build runs in a child process with the Maven
 * Wrapper, on a local repository holding only what this build installed there (invoker:install: rdma4j's artifacts,
 * their parents and dependencies); everything else (Boot's parent, plugins) comes from Maven Central, read through
 * this build's own local repository first so that nothing is downloaded twice. Its test starts the application
 * (the README's application.yml, region and reader), reads the region through the starter, GETs the actuator's rdma4j
 * health, info and meter over HTTP, and creates an RDMA Kafka consumer from the README's properties. Then the fat jar
 * the build made runs with java -jar and answers the rdma4j health check.
 */
class AdoptionIT {

    @Test
    void newProjectBuildsAndRunsAgainstTheInstalledArtifacts() throws Exception {
        Path root = Path.of(System.getProperty("rdma4j.rootDir"));
        Path project = Path.of("target", "adoption-app").toAbsolutePath();
        deleteTree(project);
        copyTree(Path.of(System.getProperty("rdma4j.appTemplate")), project);
        Path pom = project.resolve("pom.xml");
        Files.writeString(pom, Files.readString(pom)
                .replace("@rdma4j.version@", System.getProperty("rdma4j.version"))
                .replace("@spring-boot.version@", System.getProperty("spring-boot.version")));
        // The project's own wrapper, as a new project has one.
        Files.copy(root.resolve("mvnw"), project.resolve("mvnw"));
        project.resolve("mvnw").toFile().setExecutable(true);
        Files.createDirectories(project.resolve(".mvn/wrapper"));
        Files.copy(root.resolve(".mvn/wrapper/maven-wrapper.properties"), project.resolve(".mvn/wrapper/maven-wrapper.properties"));
        Path settings = project.resolve("settings.xml");
        Files.writeString(settings, settings(Path.of(System.getProperty("rdma4j.buildRepo"))));

        Path log = project.resolve("build.log");
        ProcessBuilder build = new ProcessBuilder("./mvnw", "-B", "-s", settings.toString(),
                "-Dmaven.repo.local=" + Path.of(System.getProperty("rdma4j.stagingRepo")).toAbsolutePath(), "verify")
                .directory(project.toFile()).redirectErrorStream(true).redirectOutput(log.toFile());
        build.environment().put("JAVA_HOME", System.getProperty("java.home")); // JDK 25: this test JVM's
        build.environment().remove("MAVEN_ARGS");
        Process process = build.start();
        boolean finished = process.waitFor(300, TimeUnit.SECONDS);
        if (!finished) {
            process.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
        String output = Files.readString(log, StandardCharsets.UTF_8);
        assertThat(finished).as("the project's build finishes within 300 s\n%s", tail(output)).isTrue();
        assertThat(process.exitValue()).as("the project's build succeeds\n%s", tail(output)).isZero();
        assertThat(output).as("its tests ran").contains("Tests run: 3, Failures: 0, Errors: 0, Skipped: 0")
                .as("the starter opened a transport").contains("[rdma-app] provider: ")
                .as("--enable-native-access=ALL-UNNAMED in the JVM options: no FFM warning").doesNotContain("restricted method");
        Path staged = Path.of(System.getProperty("rdma4j.stagingRepo"), "io", "rdma4j", "rdma-spring-boot-starter",
                System.getProperty("rdma4j.version"));
        assertThat(staged).as("the starter came from the staged repository").isDirectory();
        runsAsAFatJar(project.resolve("target/rdma-app-1.0.0.jar"), System.getProperty("rdma4j.version"));
    }

    /**
     * The fat jar that Boot's parent made of the project (repackage, in the build above), deployed with java -jar:
     * rdma4j's jars are modules (module-info.class) and run from BOOT-INF/lib on Boot's class path all the same.
     */
    private static void runsAsAFatJar(Path jar, String version) throws Exception {
        for (String artifact : List.of("rdma-native-loader", "rdma-core", "rdma-kafka-transport", "rdma-spring-boot-starter")) {
            assertThat(nestedEntries(jar, "BOOT-INF/lib/" + artifact + "-" + version + ".jar"))
                    .as("%s in the fat jar, with its module descriptor", artifact).contains("module-info.class");
        }
        try (BootFatJar app = BootFatJar.start(jar, List.of("--enable-native-access=ALL-UNNAMED"),
                "--server.port=0", "--server.address=127.0.0.1", "--rdma4j.endpoint.port=0")) {
            HttpResponse<String> health = app.get("/actuator/health/rdma4j");
            assertThat(health.statusCode()).as(app.output()).isEqualTo(200);
            assertThat(health.body()).as(app.output())
                    .contains("\"status\":\"UP\"", "\"provider\"", "\"publishedRegions\":[\"prices\"]");
            assertThat(app.output()).as("no FFM warning").doesNotContain("restricted method");
        }
    }

    /** The entry names of a jar nested in {@code jar}. */
    private static List<String> nestedEntries(Path jar, String nested) throws IOException {
        try (ZipFile outer = new ZipFile(jar.toFile())) {
            ZipEntry entry = outer.getEntry(nested);
            assertThat(entry).as("%s in %s", nested, jar).isNotNull();
            List<String> names = new ArrayList<>();
            try (ZipInputStream in = new ZipInputStream(outer.getInputStream(entry))) {
                for (ZipEntry e = in.getNextEntry(); e != null; e = in.getNextEntry()) {
                    names.add(e.getName());
                }
            }
            return names;
        }
    }

    /**
     * Central, with this build's local repository as a read-only mirror of released artifacts in front of it (no
     * snapshots: rdma4j's come from the staged repository only; a local repository keeps no checksums to validate).
     */
    private static String settings(Path buildRepo) {
        String url = buildRepo.toUri().toString();
        String repo = """
                    <id>build-cache</id>
                    <url>%s</url>
                    <releases><enabled>true</enabled><checksumPolicy>ignore</checksumPolicy></releases>
                    <snapshots><enabled>false</enabled></snapshots>
                """.formatted(url);
        return """
                <settings>
                  <profiles>
                    <profile>
                      <id>build-cache</id>
                      <repositories><repository>
                %s      </repository></repositories>
                      <pluginRepositories><pluginRepository>
                %s      </pluginRepository></pluginRepositories>
                    </profile>
                  </profiles>
                  <activeProfiles><activeProfile>build-cache</activeProfile></activeProfiles>
                </settings>
                """.formatted(repo, repo);
    }

    private static String tail(String output) {
        List<String> lines = output.lines().toList();
        return "--- last lines of the project's build ---\n" + String.join("\n", lines.subList(Math.max(0, lines.size() - 80), lines.size()));
    }

    private static void copyTree(Path from, Path to) throws IOException {
        try (Stream<Path> paths = Files.walk(from)) {
            for (Path p : paths.toList()) {
                Path target = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) {
                    Files.createDirectories(target);
                } else {
                    Files.copy(p, target, StandardCopyOption.REPLACE_EXISTING);
                }
            }
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
