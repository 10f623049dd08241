package io.rdma4j.it.adoption;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A Spring Boot fat jar started with {@code java -jar}, as an application is deployed: its classes and every
 * dependency (rdma4j's modular jars among them) load from BOOT-INF through Boot's class loader, on the class path.
 * Started on port 0; the web server's log line says which port it took.
 */
final class BootFatJar implements AutoCloseable {

    private static final Pattern STARTED = Pattern.compile("started on port (\\d+)");

    private final Process process;
    private final StringBuilder output = new StringBuilder();
    private final CompletableFuture<Integer> started = new CompletableFuture<>();

    private BootFatJar(Process process) {
        this.process = process;
        Thread.ofPlatform().daemon().start(this::readOutput);
    }

    /** {@code java [jvmOptions] -jar jar [args]} with this JVM's java; returns once the web server listens. */
    static BootFatJar start(Path jar, List<String> jvmOptions, String... args) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(jvmOptions);
        command.addAll(List.of("-jar", jar.toString()));
        command.addAll(List.of(args));
        BootFatJar app = new BootFatJar(new ProcessBuilder(command).redirectErrorStream(true).start());
        try {
            app.started.get(120, TimeUnit.SECONDS);
            return app;
        } catch (ExecutionException | TimeoutException e) {
            app.close();
            throw new AssertionError("the fat jar's web server did not start within 120 s:\n" + app.output(), e);
        }
    }

    private void readOutput() {
        try (BufferedReader lines = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = lines.readLine()) != null) {
                synchronized (output) {
                    output.append(line).append('\n');
                }
                Matcher m = STARTED.matcher(line);
                if (m.find()) {
                    started.complete(Integer.parseInt(m.group(1)));
                }
            }
        } catch (IOException e) {
            started.completeExceptionally(e);
        }
        started.completeExceptionally(new IllegalStateException("the application ended before its web server started"));
    }

    /** GET http://127.0.0.1:{port}{path}. */
    HttpResponse<String> get(String path) throws IOException, InterruptedException {
        try (HttpClient http = HttpClient.newHttpClient()) {
            return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + started.join() + path)).build(),
                    HttpResponse.BodyHandlers.ofString());
        }
    }

    String output() {
        synchronized (output) {
            return output.toString();
        }
    }

    @Override
    public void close() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }
}
