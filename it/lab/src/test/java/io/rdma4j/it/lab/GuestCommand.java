package io.rdma4j.it.lab;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A command-line tool run by a guest test. Output goes to a file (stdout and stderr merged) so a chatty
 * tool never blocks on a full pipe; the file stays readable while the process runs.
 */
final class GuestCommand implements AutoCloseable {

    /** The finished command: exit status and everything it printed. */
    record Result(List<String> command, int exitStatus, String output) {
        /** The output, or a failure naming the command, when the exit status is not 0. */
        String requireSuccess() {
            if (exitStatus != 0) {
                throw new AssertionError(String.join(" ", command) + " exited with " + exitStatus + ":\n" + output);
            }
            return output;
        }
    }

    private final List<String> command;
    private final Process process;
    private final Path output;

    private GuestCommand(List<String> command, Process process, Path output) {
        this.command = command;
        this.process = process;
        this.output = output;
    }

    static GuestCommand start(String... command) throws IOException {
        Path output = Files.createTempFile("guest-command", ".log");
        Process process = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(output.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                .start();
        return new GuestCommand(List.of(command), process, output);
    }

    /** Runs a command to completion. */
    static Result run(Duration timeout, String... command) throws IOException, InterruptedException {
        try (GuestCommand c = start(command)) {
            return c.await(timeout);
        }
    }

    boolean isAlive() {
        return process.isAlive();
    }

    String outputSoFar() throws IOException {
        return Files.readString(output, StandardCharsets.UTF_8);
    }

    /** Waits for the exit; a command still running after the timeout is killed and fails the test. */
    Result await(Duration timeout) throws IOException, InterruptedException {
        if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            process.destroyForcibly().waitFor();
            throw new AssertionError(String.join(" ", command) + " did not finish within " + timeout
                    + "; output so far:\n" + outputSoFar());
        }
        return new Result(command, process.exitValue(), outputSoFar());
    }

    @Override
    public void close() throws IOException {
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        Files.deleteIfExists(output);
    }
}
