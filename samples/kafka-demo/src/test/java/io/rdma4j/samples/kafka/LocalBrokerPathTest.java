package io.rdma4j.samples.kafka;

import io.rdma4j.kafka.RdmaConsumerFactory;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The README's way to try the Kafka exporter without a Kafka distribution: this sample with
 * {@code -Ddemo.arg=keep-running} keeps its broker, and prints the exporter command and the consumer settings that
 * fit it. Here the sample runs as that command runs it, the exporter jar runs with the printed arguments (on a free
 * port instead of 9299), and a consumer made from the README's properties with the printed ones reads the 20,000
 * records already in the topic, by one-sided READ.
 */
class LocalBrokerPathTest {

    private static final Pattern EXPORTER_ARGS = Pattern.compile("^\\s+(rdma\\.exporter\\.log\\.dirs=\\S+) "
            + "(rdma\\.exporter\\.bootstrap\\.servers=\\S+) rdma\\.exporter\\.listen\\.address=127\\.0\\.0\\.1:9299$");
    private static final Pattern CONSUMER = Pattern.compile("bootstrap\\.servers=([^,]+), rdma\\.fetch\\.enabled=true");
    private static final Pattern LISTENING = Pattern.compile("rdma4j log exporter listening on /?([\\d.]+:\\d+)");

    @Test
    void theKeptBrokerServesThePrintedExporterAndAConsumerReadsWhatIsThere() throws Exception {
        Path root = Path.of(System.getProperty("user.dir")).resolve("../..").normalize();
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process demo = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
                "-cp", System.getProperty("java.class.path"), KafkaRdmaDemo.class.getName(), "keep-running")
                .redirectErrorStream(true).start();
        Process exporter = null;
        try {
            Lines demoOut = Lines.of(demo.getInputStream());
            String exporterLine = demoOut.await(l -> l.contains("-exporter.jar"), "the exporter command");
            Matcher args = EXPORTER_ARGS.matcher(demoOut.await(l -> EXPORTER_ARGS.matcher(l).matches(), "its arguments"));
            assertThat(args.matches()).isTrue();
            Matcher consumer = CONSUMER.matcher(demoOut.await(l -> CONSUMER.matcher(l).find(), "the consumer's settings"));
            assertThat(consumer.find()).isTrue();
            String jar = exporterLine.trim().split("\\s+")[3];
            assertThat(root.resolve(jar)).as("the jar the printed command names").isRegularFile();

            exporter = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-jar", jar, args.group(1), args.group(2),
                    "rdma.exporter.listen.address=127.0.0.1:0").directory(root.toFile()).redirectErrorStream(true).start();
            Lines exporterOut = Lines.of(exporter.getInputStream());
            Matcher listening = LISTENING.matcher(exporterOut.await(l -> LISTENING.matcher(l).find(), "the exporter's start"));
            assertThat(listening.find()).isTrue();

            Properties props = new Properties();
            try (InputStream in = Files.newInputStream(root.resolve("it/adoption/src/test/app/src/main/resources/consumer.properties"))) {
                props.load(in); // the README's consumer properties
            }
            props.put("bootstrap.servers", consumer.group(1));
            props.put("rdma.exporter.address", listening.group(1));
            props.remove("rdma.shared-secret"); // the exporter was started without one, on loopback
            props.put("rdma.fetch.setup.wait.ms", "30000"); // waits for its exporter connection: every record is RDMA's
            try (Consumer<String, String> c = RdmaConsumerFactory.create(props, new StringDeserializer(), new StringDeserializer())) {
                c.subscribe(List.of("rdma-demo"));
                int received = 0;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (received < 20_000 && System.nanoTime() < deadline) {
                    received += c.poll(Duration.ofMillis(200)).count();
                }
                assertThat(received).as("the records already in the topic (auto.offset.reset=earliest)").isEqualTo(20_000);
                assertThat(KafkaRdmaDemo.rdmaRecords(c)).as("read by one-sided READ").isEqualTo(20_000);
            }
        } finally {
            if (exporter != null) {
                exporter.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
            }
            demo.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
    }

    /** A process's output lines, read on a thread of their own so that the process never blocks on a full pipe. */
    private record Lines(BlockingQueue<String> queue, List<String> seen) {

        static Lines of(InputStream in) {
            Lines lines = new Lines(new LinkedBlockingQueue<>(), new ArrayList<>());
            Thread.ofPlatform().daemon().start(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        lines.queue.add(line);
                    }
                } catch (IOException ignored) {
                    // the process ended
                }
            });
            return lines;
        }

        String await(java.util.function.Predicate<String> wanted, String what) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (System.nanoTime() < deadline) {
                String line = queue.poll(100, TimeUnit.MILLISECONDS);
                if (line != null) {
                    seen.add(line);
                    if (wanted.test(line)) {
                        return line;
                    }
                }
            }
            throw new AssertionError("no line with " + what + " within 120 s; the output:\n" + String.join("\n", seen));
        }
    }
}
