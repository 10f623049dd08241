package io.rdma4j.testsupport.kafka;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.Uuid;

import java.io.IOException;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A real Kafka KRaft combined-mode node (broker and controller) in a child JVM started as a user starts one:
 * {@code kafka-storage format}, then {@code kafka-server-start server.properties}, with this JVM's class path
 * (which holds the broker jars of the test kit and this module's classes). Its output goes to a file under
 * {@code target/} whose tail {@link #logTail()} gives for assertion messages. rdma-kafka-transport's tests run the
 * broker plugin and multi-broker clusters with it; the starter's Spring Kafka test runs it on the Boot 3.5 line, whose
 * Kafka 3.9 jars cannot run a 4.3.1 broker in-process.
 */
public final class KafkaBrokerProcess implements AutoCloseable {

    private static final Duration START_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration STOP_TIMEOUT = Duration.ofSeconds(30);

    private final Path log;
    private final String host;
    private final int brokerPort;
    private final String classPath;
    private final Path serverProperties;
    private Process process;

    private KafkaBrokerProcess(Path log, String host, int brokerPort, String classPath, Path serverProperties) {
        this.log = log;
        this.host = host;
        this.brokerPort = brokerPort;
        this.classPath = classPath;
        this.serverProperties = serverProperties;
    }

    /**
     * Formats {@code dir/logs} and starts the node with {@code extra} added to its {@code server.properties};
     * returns once an Admin client can describe the cluster. The caller closes it, which kills the child if it is
     * still running.
     */
    public static KafkaBrokerProcess start(Path dir, String name, Map<String, String> extra) throws Exception {
        return start(dir, name, extra, System.getProperty("java.class.path"));
    }

    /** As {@link #start(Path, String, Map)}, with the node's class path given. */
    public static KafkaBrokerProcess start(Path dir, String name, Map<String, String> extra, String classPath) throws Exception {
        return startCluster(dir, name, 1, node -> extra, classPath).getFirst();
    }

    /**
     * A cluster of {@code nodes} processes: node 1 is broker and controller (the one controller), nodes 2 to n are
     * brokers only. Node N listens and advertises on {@code 127.0.0.N} (its own loopback address, as a broker has its
     * own host), so per-broker services on one port convention can run side by side. Returns once every node answers;
     * the caller closes them all.
     */
    public static List<KafkaBrokerProcess> startCluster(Path dir, String name, int nodes,
                                                        java.util.function.IntFunction<Map<String, String>> extra,
                                                        String classPath) throws Exception {
        int controllerPort = freePort();
        String clusterId = Uuid.randomUuid().toString();
        List<KafkaBrokerProcess> started = new ArrayList<>();
        List<Process> formats = new ArrayList<>();
        Path logDir = Path.of("target", "broker-process");
        Files.createDirectories(logDir);
        try {
            for (int node = 1; node <= nodes; node++) {
                String host = host(node);
                int brokerPort = freePort();
                Map<String, String> props = new LinkedHashMap<>();
                props.put("process.roles", node == 1 ? "broker,controller" : "broker");
                props.put("node.id", Integer.toString(node));
                props.put("controller.quorum.voters", "1@127.0.0.1:" + controllerPort);
                props.put("listeners", "PLAINTEXT://" + host + ":" + brokerPort + (node == 1 ? ",CONTROLLER://127.0.0.1:" + controllerPort : ""));
                props.put("advertised.listeners", "PLAINTEXT://" + host + ":" + brokerPort);
                props.put("controller.listener.names", "CONTROLLER");
                props.put("inter.broker.listener.name", "PLAINTEXT");
                props.put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
                props.put("log.dirs", dir.resolve("logs-" + node).toString());
                props.put("offsets.topic.replication.factor", "1");
                props.put("transaction.state.log.replication.factor", "1");
                props.put("transaction.state.log.min.isr", "1");
                props.put("group.initial.rebalance.delay.ms", "0");
                props.putAll(extra.apply(node));
                Path serverProperties = dir.resolve("server-" + node + ".properties");
                StringBuilder text = new StringBuilder();
                props.forEach((k, v) -> text.append(k).append('=').append(v).append('\n'));
                Files.writeString(serverProperties, text);
                KafkaBrokerProcess broker = new KafkaBrokerProcess(logDir.resolve(nodes == 1 ? name + ".log" : name + "-" + node + ".log")
                        .toAbsolutePath(), host, brokerPort, classPath, serverProperties);
                Files.deleteIfExists(broker.log);
                started.add(broker);
                // Every node's storage is formatted at once: each format is a JVM of its own, seconds on 2 cores.
                formats.add(broker.launch("kafka.tools.StorageTool", "format", "-t", clusterId, "-c", serverProperties.toString()));
            }
            for (int i = 0; i < started.size(); i++) {
                Process format = formats.get(i);
                if (!format.waitFor(START_TIMEOUT.toSeconds(), TimeUnit.SECONDS) || format.exitValue() != 0) {
                    throw new IllegalStateException("formatting the storage of node " + (i + 1) + " failed\n" + started.get(i).logTail());
                }
            }
            for (KafkaBrokerProcess broker : started) {
                broker.process = broker.launch("kafka.Kafka", broker.serverProperties.toString());
            }
            for (KafkaBrokerProcess broker : started) {
                broker.awaitReady();
            }
            return started;
        } catch (Exception | Error e) {
            for (Process format : formats) {
                stop(format);
            }
            started.forEach(KafkaBrokerProcess::close);
            throw e;
        }
    }

    /**
     * Ends a cluster of {@link #startCluster} once a test is done with it: every node killed at once, as nothing on
     * them matters any more (a controlled shutdown takes seconds per broker). Never throws InterruptedException.
     */
    public static void closeCluster(List<KafkaBrokerProcess> cluster) {
        try {
            for (KafkaBrokerProcess node : cluster) {
                if (node.process != null) {
                    node.process.destroyForcibly();
                }
            }
        } finally {
            cluster.forEach(KafkaBrokerProcess::close); // waits for each
        }
    }

    /** The loopback address node {@code node} of {@link #startCluster} listens on. */
    public static String host(int node) {
        return "127.0.0." + node;
    }

    public String bootstrapServers() {
        return host + ":" + brokerPort;
    }

    /** Stops the node as {@code kafka-server-stop} does (SIGTERM, so shutdown hooks close the plugins) and waits. */
    public void stopGracefully() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(STOP_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
            throw new IllegalStateException("the broker did not stop within " + STOP_TIMEOUT + " of SIGTERM\n" + logTail());
        }
    }

    /**
     * Stops the node gracefully and starts it again on the same storage, ports and properties (a rolling restart);
     * returns once it answers again.
     */
    public void restart() throws Exception {
        stopGracefully();
        startAgain();
    }

    /** Kills the node at once (SIGKILL: no controlled shutdown, no shutdown hooks), as a crash would. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(STOP_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
            throw new IllegalStateException("the broker did not die within " + STOP_TIMEOUT + " of SIGKILL");
        }
    }

    /** Starts the stopped or killed node again on the same storage, ports and properties; returns once it answers. */
    public void startAgain() throws Exception {
        process = launch("kafka.Kafka", serverProperties.toString());
        awaitReady();
    }

    /** The last lines the child printed, for failure messages. */
    public String logTail() {
        try {
            List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
            return "--- last lines of " + log + " ---\n"
                    + String.join("\n", lines.subList(Math.max(0, lines.size() - 60), lines.size()));
        } catch (IOException e) {
            return "(no broker output at " + log + ": " + e + ")";
        }
    }

    /** Everything the child printed. */
    public String output() throws IOException {
        return Files.readString(log, StandardCharsets.UTF_8);
    }

    /** Never throws InterruptedException, so try-with-resources cannot swallow an interrupt. */
    @Override
    public void close() {
        if (process != null) {
            try {
                stop(process);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while stopping the broker process", e);
            }
        }
    }

    private Process launch(String mainClass, String... args) throws IOException {
        List<String> command = new ArrayList<>(List.of(
                ProcessHandle.current().info().command().orElseThrow(() -> new IllegalStateException("cannot tell this JVM's java binary")),
                "--enable-native-access=ALL-UNNAMED", "-Xmx512m",
                "-cp", classPath,
                mainClass));
        command.addAll(List.of(args));
        try (OutputStream header = Files.newOutputStream(log, java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.APPEND)) {
            header.write(("=== " + String.join(" ", command.subList(command.size() - args.length - 1, command.size())) + "\n")
                    .getBytes(StandardCharsets.UTF_8));
        }
        return new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
    }

    private void awaitReady() throws Exception {
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrapServers(),
                "request.timeout.ms", "2000", "default.api.timeout.ms", "2000"))) {
            while (true) {
                if (!process.isAlive()) {
                    throw new IllegalStateException("the broker exited with " + process.exitValue() + "\n" + logTail());
                }
                try {
                    if (!admin.describeCluster().nodes().get(2, TimeUnit.SECONDS).isEmpty()) {
                        return;
                    }
                } catch (ExecutionException | TimeoutException e) {
                    // not up yet
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the broker did not answer describeCluster within " + START_TIMEOUT + "\n" + logTail());
                }
                Thread.sleep(200);
            }
        }
    }

    /** Asks politely, then insists, so no child outlives the test. */
    private static void stop(Process p) throws InterruptedException {
        if (!p.isAlive()) {
            return;
        }
        p.destroy();
        if (!p.waitFor(STOP_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
            p.destroyForcibly();
            p.waitFor(STOP_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        }
    }

    public static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
