package io.rdma4j.core.doctor;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.fail;

/**
 * A started {@code rdma4j-doctor --serve} process once it announced its port: the port, the provider line it serves
 * with, and its further output lines. Public in rdma-core's test-jar: the soft-RDMA lab's doctor test uses it too.
 */
public record ServingDoctor(Process process, int port, String via, LinkedBlockingQueue<String> lines) {

    /** Waits up to {@code timeout} for {@code process} to print that it serves on {@code host}; fails with its output. */
    public static ServingDoctor await(Process process, String host, Duration timeout) throws InterruptedException {
        Pattern serving = Pattern.compile("rdma4j doctor serving on " + Pattern.quote(host) + ":(\\d+) via (.*)");
        LinkedBlockingQueue<String> lines = lines(process);
        StringBuilder seen = new StringBuilder();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            String line = lines.poll(1, TimeUnit.SECONDS);
            if (line == null) {
                if (!process.isAlive()) {
                    break;
                }
                continue;
            }
            seen.append(line).append('\n');
            Matcher m = serving.matcher(line);
            if (m.matches()) {
                return new ServingDoctor(process, Integer.parseInt(m.group(1)), m.group(2), lines);
            }
        }
        return fail("the --serve doctor did not announce its port on " + host + ":\n" + seen);
    }

    /** The next line that starts with {@code prefix}, or null when none comes within {@code timeout} of each other. */
    public String nextLineStartingWith(String prefix, Duration timeout) throws InterruptedException {
        String line = lines.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
        while (line != null && !line.startsWith(prefix)) {
            line = lines.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
        }
        return line;
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
}
