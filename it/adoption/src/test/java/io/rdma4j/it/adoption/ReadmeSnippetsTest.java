package io.rdma4j.it.adoption;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * README.md and the code that runs its examples cannot drift apart: every Java, XML, YAML or properties snippet in the
 * README is preceded by {@code <!-- snippet: FILE [FILE...] -->}, and each of its lines (ignoring indentation) is a
 * line of one of those files, which the test command compiles and runs. Shell snippets are exempt; the commands they
 * show are run by the tests the README names next to them.
 */
class ReadmeSnippetsTest {

    private static final Pattern MARKER = Pattern.compile("<!-- snippet: (.+) -->");
    private static final Pattern FENCE = Pattern.compile("^\\s*```(\\w*)\\s*$");
    private static final Set<String> CHECKED = Set.of("java", "xml", "yaml", "properties");

    @Test
    void everySnippetLineIsInTheCodeThatRunsIt() throws IOException {
        Path root = Path.of(System.getProperty("rdma4j.rootDir"));
        List<String> readme = Files.readAllLines(root.resolve("README.md"));
        List<String> problems = new ArrayList<>();
        int checked = 0;
        String[] files = null;
        for (int i = 0; i < readme.size(); i++) {
            String line = readme.get(i);
            Matcher marker = MARKER.matcher(line.strip());
            if (marker.matches()) {
                files = marker.group(1).strip().split("\\s+");
                continue;
            }
            Matcher fence = FENCE.matcher(line);
            if (!fence.matches() || fence.group(1).isEmpty()) {
                if (!line.isBlank()) {
                    files = null; // a marker belongs to the snippet right below it
                }
                continue;
            }
            int start = i + 1;
            int end = start;
            while (end < readme.size() && !FENCE.matcher(readme.get(end)).matches()) {
                end++;
            }
            List<String> snippet = readme.subList(start, end);
            if (CHECKED.contains(fence.group(1))) {
                if (files == null) {
                    problems.add("README.md:" + (i + 1) + ": a " + fence.group(1) + " snippet without a <!-- snippet: FILE --> line naming the code that runs it");
                } else {
                    problems.addAll(missingLines(root, files, snippet, start + 1));
                    checked++;
                }
            }
            files = null;
            i = end;
        }
        assertThat(problems).as("README snippets and the code that runs them").isEmpty();
        assertThat(checked).as("snippets checked").isGreaterThanOrEqualTo(8);
    }

    private static List<String> missingLines(Path root, String[] files, List<String> snippet, int firstLine) throws IOException {
        Set<String> code = new HashSet<>();
        for (String file : files) {
            Path path = root.resolve(file);
            if (!Files.isRegularFile(path)) {
                return List.of("README.md:" + firstLine + ": the snippet names " + file + ", which does not exist");
            }
            for (String l : Files.readAllLines(path)) {
                // The application template's placeholders, as AdoptionIT fills them in.
                code.add(l.replace("@rdma4j.version@", System.getProperty("rdma4j.version"))
                        .replace("@spring-boot.version@", System.getProperty("spring-boot.version")).strip());
            }
        }
        List<String> missing = new ArrayList<>();
        for (int j = 0; j < snippet.size(); j++) {
            String l = snippet.get(j).strip();
            if (!l.isEmpty() && !code.contains(l)) {
                missing.add("README.md:" + (firstLine + j) + ": not in " + String.join(" or ", files) + ": " + l);
            }
        }
        return missing;
    }
}
