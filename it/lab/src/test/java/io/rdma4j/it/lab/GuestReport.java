package io.rdma4j.it.lab;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import javax.xml.parsers.ParserConfigurationException;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;
import org.xml.sax.SAXException;

/**
 * The outcome of one guest JVM run, read from the legacy JUnit XML reports the console launcher writes
 * ({@code TEST-*.xml}). A skipped guest test counts as a problem: the lab must not skip silently.
 */
public record GuestReport(String device, int executed, List<String> problems) {

    static GuestReport read(String device, Path reportsDir) throws IOException {
        if (!Files.isDirectory(reportsDir)) {
            return new GuestReport(device, 0, List.of(device + ": no JUnit reports in " + reportsDir));
        }
        List<Path> files;
        try (Stream<Path> s = Files.list(reportsDir)) {
            files = s.filter(p -> p.getFileName().toString().matches("TEST-.*\\.xml")).sorted().toList();
        }
        if (files.isEmpty()) {
            return new GuestReport(device, 0, List.of(device + ": no TEST-*.xml in " + reportsDir));
        }
        int executed = 0;
        List<String> problems = new ArrayList<>();
        for (Path file : files) {
            NodeList cases = parse(file).getElementsByTagName("testcase");
            for (int i = 0; i < cases.getLength(); i++) {
                Element testCase = (Element) cases.item(i);
                String name = testCase.getAttribute("classname") + "." + testCase.getAttribute("name");
                executed++;
                for (String outcome : List.of("failure", "error", "skipped")) {
                    NodeList found = testCase.getElementsByTagName(outcome);
                    if (found.getLength() > 0) {
                        Element e = (Element) found.item(0);
                        String message = e.getAttribute("message");
                        problems.add(device + ": " + name + " " + outcome
                                + (message.isBlank() ? "" : ": " + message)
                                + (outcome.equals("skipped") ? "" : "\n" + firstLines(e.getTextContent(), 8)));
                    }
                }
            }
        }
        return new GuestReport(device, executed, List.copyOf(problems));
    }

    public boolean passed() {
        return executed > 0 && problems.isEmpty();
    }

    public String summary() {
        return device + ": " + executed + " tests executed, " + problems.size() + " problems"
                + (executed == 0 && problems.isEmpty() ? " (no tests ran)" : "");
    }

    private static Element parse(Path file) throws IOException {
        try {
            DocumentBuilderFactory factory = DocumentBuilderFactory.newInstance();
            factory.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
            return factory.newDocumentBuilder().parse(file.toFile()).getDocumentElement();
        } catch (ParserConfigurationException | SAXException e) {
            throw new IOException("unreadable JUnit report " + file + ": " + e.getMessage(), e);
        }
    }

    private static String firstLines(String text, int lines) {
        return String.join("\n", text.strip().lines().limit(lines).toList());
    }
}
