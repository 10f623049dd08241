package io.rdma4j.core;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The package rules, checked on the sources of the whole repository: rdma-core's packages form no cycle, and the
 * integrations (every {@code rdma-*} module but rdma-core and rdma-native-loader, and every sample) use only the
 * exported API ({@code io.rdma4j.core}, {@code .spi}, {@code .pool}, {@code .metrics}): never the implementation
 * ({@code io.rdma4j.core.internal}), a provider ({@code io.rdma4j.core.tcp}, {@code io.rdma4j.core.verbs}) or the
 * generated bindings ({@code io.rdma4j.nativeloader.bindings}). References count in code (imports and qualified
 * names), not in comments or string literals. No hand-written main class is over {@value #MAX_HAND_WRITTEN_LINES}
 * lines.
 * <p>
 * The module system enforces the integration rule too, for the modules with a {@code module-info.java}
 * (rdma-kafka-transport and rdma-spring-boot-starter compile on the module path against rdma-core's exports, and
 * it/modules proves the boundary at run time). The regex stays for what compiles on the class path: rdma-spark-shuffle
 * (Spark has no usable module name, so it has no descriptor) and the samples.
 */
class ArchitectureTest {

    /** Surefire runs in the module's directory; the repository is its parent. */
    private static final Path REPOSITORY = Path.of("").toAbsolutePath().getParent();
    private static final String API = "io.rdma4j.core";
    /**
     * The API's pool package counts as part of the API here: {@code RdmaTransport.createBufferPool} returns a pool and
     * a pooled buffer is a registered region, so the two name each other by design. Every other package stays out
     * of cycles with them.
     */
    private static final String API_POOL = "io.rdma4j.core.pool";
    private static final Pattern FORBIDDEN_IN_INTEGRATIONS =
            Pattern.compile("\\bio\\.rdma4j\\.(core\\.(internal|tcp|verbs)|nativeloader\\.bindings)\\b");
    private static final Pattern PACKAGE = Pattern.compile("\\bpackage\\s+([\\w.]+)\\s*;");
    private static final Pattern IMPORT = Pattern.compile("\\bimport\\s+(?:static\\s+)?([\\w.]+)(?:\\.\\*)?\\s*;");
    private static final Pattern QUALIFIED = Pattern.compile("\\b(io\\.rdma4j(?:\\.[a-z_][a-z0-9_]*)+)\\.[A-Z*]");

    @Test
    void rdmaCorePackagesFormNoCycle() {
        Map<String, Map<String, Set<String>>> graph = packageGraph(REPOSITORY.resolve("rdma-core/src/main/java"));
        assertThat(graph).as("rdma-core's packages, read from its sources")
                .containsKeys(API, "io.rdma4j.core.internal", "io.rdma4j.core.spi", "io.rdma4j.core.tcp",
                        "io.rdma4j.core.verbs", "io.rdma4j.core.metrics", "io.rdma4j.core.doctor");
        List<String> cycles = describeCycles(graph);
        assertThat(cycles).as("package cycles in rdma-core (an edge names the files that make it): let the API find"
                + " its implementation through RdmaTransportFactory, and keep providers and SPI off the implementation")
                .isEmpty();
    }

    @Test
    void integrationsUseOnlyTheExportedApi() throws IOException {
        List<Path> integrations = integrationModules();
        assertThat(integrations.stream().map(p -> REPOSITORY.relativize(p).toString()))
                .contains("rdma-spark-shuffle", "rdma-kafka-transport", "rdma-spring-boot-starter", "rdma-netty-transport",
                        "samples/spark-demo", "samples/netty-demo");
        List<String> violations = new ArrayList<>();
        for (Path module : integrations) {
            List<Path> sources = javaSources(module.resolve("src/main/java"));
            sources.addAll(javaSources(module.resolve("src/test/java")));
            assertThat(sources).as("Java sources of " + module).isNotEmpty();
            for (Path source : sources) {
                String[] lines = code(read(source)).split("\n", -1);
                for (int i = 0; i < lines.length; i++) {
                    Matcher m = FORBIDDEN_IN_INTEGRATIONS.matcher(lines[i]);
                    if (m.find()) {
                        violations.add(REPOSITORY.relativize(source) + ":" + (i + 1) + " uses " + m.group());
                    }
                }
            }
        }
        assertThat(violations).as("integrations must use only rdma-core's exported API (io.rdma4j.core, .spi, .pool,"
                + " .metrics): open transports with RdmaTransport.open, pools with transport.createBufferPool").isEmpty();
    }

    /** Hand-written main classes stay small enough to read whole; generated bindings are exempt. */
    static final int MAX_HAND_WRITTEN_LINES = 550;

    @Test
    void noHandWrittenMainClassIsOversized() throws IOException {
        List<String> oversized = new ArrayList<>();
        try (Stream<Path> modules = Files.list(REPOSITORY)) {
            for (Path module : modules.filter(p -> p.getFileName().toString().startsWith("rdma-")).sorted().toList()) {
                for (Path source : javaSources(module.resolve("src/main/java"))) {
                    if (source.toString().contains("/nativeloader/bindings/")) {
                        continue;
                    }
                    long lines = read(source).lines().count();
                    if (lines > MAX_HAND_WRITTEN_LINES) {
                        oversized.add(REPOSITORY.relativize(source) + " (" + lines + " lines)");
                    }
                }
            }
        }
        assertThat(oversized).as("hand-written main classes over " + MAX_HAND_WRITTEN_LINES + " lines: split each into"
                + " pieces that own one job (as the verbs provider's QueuePairResources, MessageChannel, CompletionPolling)")
                .isEmpty();
    }

    @Test
    void theCheckSeesACycleAndAForbiddenReference() {
        Map<String, Map<String, Set<String>>> graph = new TreeMap<>();
        edge(graph, "a", "b", "A.java");
        edge(graph, "b", "c", "B.java");
        edge(graph, "c", "a", "C.java");
        edge(graph, "c", "d", "C.java");
        assertThat(describeCycles(graph)).singleElement().asString()
                .contains("a -> b (A.java)", "b -> c (B.java)", "c -> a (C.java)").doesNotContain("d");
        assertThat(code("""
                import io.rdma4j.core.RdmaTransport;
                // io.rdma4j.core.internal in a comment
                String s = "io.rdma4j.core.tcp in a string";
                var t = new io.rdma4j.core.internal.DefaultRdmaTransport();
                """)).containsOnlyOnce("io.rdma4j.core.internal").doesNotContain("io.rdma4j.core.tcp");
    }

    /** package -> referenced package of the same source tree -> the files that reference it. */
    private static Map<String, Map<String, Set<String>>> packageGraph(Path root) {
        Map<Path, String> packages = new HashMap<>();
        for (Path source : javaSources(root)) {
            if (source.getFileName().toString().equals("module-info.java")) {
                continue; // the module's descriptor: no package, no code
            }
            Matcher m = PACKAGE.matcher(code(read(source)));
            assertThat(m.find()).as(source + " declares a package").isTrue();
            packages.put(source, layer(m.group(1)));
        }
        Set<String> known = new TreeSet<>(packages.values());
        Map<String, Map<String, Set<String>>> graph = new TreeMap<>();
        known.forEach(p -> graph.put(p, new TreeMap<>()));
        packages.forEach((source, from) -> {
            String code = code(read(source));
            for (Pattern reference : List.of(IMPORT, QUALIFIED)) {
                Matcher m = reference.matcher(code);
                while (m.find()) {
                    String to = layer(packageOf(m.group(1)));
                    if (!to.equals(from) && known.contains(to)) {
                        edge(graph, from, to, source.getFileName().toString());
                    }
                }
            }
        });
        return graph;
    }

    private static String layer(String pkg) {
        return pkg.equals(API_POOL) ? API : pkg;
    }

    /** The package part of a qualified name: the segments before the first capitalised one. */
    private static String packageOf(String qualified) {
        List<String> segments = new ArrayList<>();
        for (String segment : qualified.split("\\.")) {
            if (!segment.isEmpty() && Character.isUpperCase(segment.charAt(0))) {
                break;
            }
            segments.add(segment);
        }
        return String.join(".", segments);
    }

    private static void edge(Map<String, Map<String, Set<String>>> graph, String from, String to, String file) {
        graph.computeIfAbsent(to, k -> new TreeMap<>());
        graph.computeIfAbsent(from, k -> new TreeMap<>()).computeIfAbsent(to, k -> new TreeSet<>()).add(file);
    }

    /** Each strongly connected set of packages (Tarjan), with the edges inside it. */
    private static List<String> describeCycles(Map<String, Map<String, Set<String>>> graph) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<Set<String>> components = new ArrayList<>();
        int[] counter = {0};
        for (String start : graph.keySet()) {
            if (!index.containsKey(start)) {
                strongConnect(start, graph, index, low, stack, onStack, components, counter);
            }
        }
        List<String> cycles = new ArrayList<>();
        for (Set<String> component : components) {
            if (component.size() < 2) {
                continue;
            }
            StringBuilder s = new StringBuilder("cycle among " + component + ":");
            for (String from : component) {
                graph.get(from).forEach((to, files) -> {
                    if (component.contains(to)) {
                        s.append("\n    ").append(from).append(" -> ").append(to).append(" (")
                                .append(String.join(", ", files)).append(')');
                    }
                });
            }
            cycles.add(s.toString());
        }
        return cycles;
    }

    private static void strongConnect(String v, Map<String, Map<String, Set<String>>> graph, Map<String, Integer> index,
            Map<String, Integer> low, Deque<String> stack, Set<String> onStack, List<Set<String>> components,
            int[] counter) {
        index.put(v, counter[0]);
        low.put(v, counter[0]);
        counter[0]++;
        stack.push(v);
        onStack.add(v);
        for (String w : graph.get(v).keySet()) {
            if (!index.containsKey(w)) {
                strongConnect(w, graph, index, low, stack, onStack, components, counter);
                low.put(v, Math.min(low.get(v), low.get(w)));
            } else if (onStack.contains(w)) {
                low.put(v, Math.min(low.get(v), index.get(w)));
            }
        }
        if (low.get(v).equals(index.get(v))) {
            Set<String> component = new TreeSet<>();
            String w;
            do {
                w = stack.pop();
                onStack.remove(w);
                component.add(w);
            } while (!w.equals(v));
            components.add(component);
        }
    }

    /** The integrations: every rdma-* module but rdma-core and rdma-native-loader, and every sample module. */
    private static List<Path> integrationModules() throws IOException {
        List<Path> modules = new ArrayList<>();
        try (Stream<Path> top = Files.list(REPOSITORY); Stream<Path> samples = Files.list(REPOSITORY.resolve("samples"))) {
            top.filter(p -> p.getFileName().toString().startsWith("rdma-"))
                    .filter(p -> !Set.of("rdma-core", "rdma-native-loader").contains(p.getFileName().toString()))
                    .filter(p -> Files.isRegularFile(p.resolve("pom.xml")))
                    .forEach(modules::add);
            samples.filter(p -> Files.isRegularFile(p.resolve("pom.xml"))).forEach(modules::add);
        }
        modules.sort(null);
        return modules;
    }

    private static List<Path> javaSources(Path root) {
        if (!Files.isDirectory(root)) {
            return new ArrayList<>();
        }
        try (Stream<Path> files = Files.walk(root)) {
            return new ArrayList<>(files.filter(p -> p.toString().endsWith(".java")).sorted().toList());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static String read(Path source) {
        try {
            return Files.readString(source);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The source without comments and without the contents of string, text block and char literals; lines kept. */
    static String code(String source) {
        StringBuilder out = new StringBuilder(source.length());
        int i = 0;
        int n = source.length();
        while (i < n) {
            char c = source.charAt(i);
            if (source.startsWith("//", i)) {
                while (i < n && source.charAt(i) != '\n') {
                    i++;
                }
            } else if (source.startsWith("/*", i)) {
                int end = source.indexOf("*/", i + 2);
                end = end < 0 ? n : end + 2;
                source.substring(i, end).chars().filter(ch -> ch == '\n').forEach(ch -> out.append('\n'));
                i = end;
            } else if (source.startsWith("\"\"\"", i)) {
                int end = source.indexOf("\"\"\"", i + 3);
                end = end < 0 ? n : end + 3;
                out.append("\"\"");
                source.substring(i, end).chars().filter(ch -> ch == '\n').forEach(ch -> out.append('\n'));
                i = end;
            } else if (c == '"' || c == '\'') {
                int j = i + 1;
                while (j < n && source.charAt(j) != c && source.charAt(j) != '\n') {
                    j += source.charAt(j) == '\\' ? 2 : 1;
                }
                out.append(c).append(c);
                i = Math.min(n, j + 1);
            } else {
                out.append(c);
                i++;
            }
        }
        return out.toString();
    }
}
