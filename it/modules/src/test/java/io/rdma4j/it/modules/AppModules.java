package io.rdma4j.it.modules;

import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.StandardLocation;
import javax.tools.ToolProvider;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The application modules of src/test/modules: each is compiled against the module path the build copied (rdma4j's
 * jars and their dependencies) and run in a JVM of its own, on that module path and nothing else.
 */
final class AppModules {

    static final Path MODULE_PATH = Path.of(System.getProperty("rdma4j.modulePath"));
    private static final Path SOURCES = Path.of(System.getProperty("rdma4j.appSources"));
    private static final Path CLASSES = Path.of(System.getProperty("rdma4j.appClasses"));

    /** javac's outcome: whether it compiled, and its error messages. */
    record Compilation(boolean compiled, List<String> errors) {
    }

    /** A finished JVM: its exit code and its standard output and error, interleaved. */
    record Run(int exitCode, String output) {
    }

    private AppModules() {
    }

    /** Compiles src/test/modules/{module} (its module-info.java and packages) into an exploded module. */
    static Compilation compile(String module) throws IOException {
        Path out = CLASSES.resolve(module);
        deleteTree(out);
        Files.createDirectories(out);
        List<Path> sources;
        try (Stream<Path> files = Files.walk(SOURCES.resolve(module))) {
            sources = files.filter(p -> p.toString().endsWith(".java")).sorted().toList();
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        try (StandardJavaFileManager files = javac.getStandardFileManager(diagnostics, Locale.ROOT, StandardCharsets.UTF_8)) {
            files.setLocationFromPaths(StandardLocation.CLASS_PATH, List.of()); // not this test's class path
            boolean compiled = javac.getTask(null, files, diagnostics,
                    List.of("--module-path", MODULE_PATH.toString(), "-d", out.toString()), null,
                    files.getJavaFileObjectsFromPaths(sources)).call();
            List<String> errors = diagnostics.getDiagnostics().stream()
                    .filter(d -> d.getKind() == Diagnostic.Kind.ERROR)
                    .map(d -> d.getMessage(Locale.ROOT)).toList();
            return new Compilation(compiled, errors);
        }
    }

    /**
     * Runs {@code java [options] --module-path MODULE_PATH[:compiled module] -m main [args]}, {@code main} being
     * module/class; {@code app} names a module compiled by {@link #compile}, or is null.
     */
    static Run run(List<String> options, String app, String main, String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-XX:TieredStopAtLevel=1"); // short runs: the fast compiler alone
        command.addAll(options);
        command.add("--module-path");
        command.add(app == null ? MODULE_PATH.toString() : MODULE_PATH + File.pathSeparator + CLASSES.resolve(app));
        command.add("-m");
        command.add(main);
        command.addAll(List.of(args));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        boolean finished = process.waitFor(60, TimeUnit.SECONDS);
        if (!finished) {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        assertThat(finished).as("%s finished within 60 s:%n%s", String.join(" ", command), output).isTrue();
        return new Run(process.exitValue(), output);
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
