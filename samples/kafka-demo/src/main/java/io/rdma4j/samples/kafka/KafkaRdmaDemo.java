package io.rdma4j.samples.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

/**
 * A Kafka broker in this process, its log exporter, and a consumer created from properties alone that
 * fetches the records by one-sided READ: RDMA READ on the verbs provider, emulated over TCP by the {@code tcp}
 * provider when no RDMA NIC is present.
 * Exits 0 when every produced record came back in order with its key and value; 1 otherwise.
 */
public final class KafkaRdmaDemo {

    private static final String TOPIC = "rdma-demo";
    private static final int PARTITIONS = 3;
    private static final int RECORDS = 20_000;

    private KafkaRdmaDemo() {
    }

    @SuppressWarnings("try") // KafkaClusterTestKit.close() declares Exception; main passes everything on
    public static void main(String[] args) throws Exception {
        // `--exit` (the demo profile's default) ends after the check; -Ddemo.arg=keep-running keeps the broker for
        // trying the exporter jar and a consumer against it.
        boolean keepRunning = !java.util.Arrays.asList(args).contains("--exit");
        try (KafkaClusterTestKit kafka = startBroker()) {
            String bootstrap = kafka.bootstrapServers();
            String logDirs = String.join(",", kafka.nodes().brokerNodes().values().iterator().next().logDataDirectories());
            System.out.println("[kafka-demo] broker up at " + bootstrap + ", log.dirs=" + logDirs);
            createTopic(bootstrap);
            produce(bootstrap);

            Map<String, Object> exporterProps = new HashMap<>();
            exporterProps.put(ExporterConfig.LOG_DIRS, logDirs);
            exporterProps.put(ExporterConfig.BOOTSTRAP, bootstrap);
            exporterProps.put(ExporterConfig.LISTEN, "127.0.0.1:0");
            try (LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(exporterProps))) {
                System.out.println("[kafka-demo] log exporter on " + exporter.address() + ", provider "
                        + exporter.transport().selection());
                int failures = consumeAndVerify(bootstrap, "127.0.0.1:" + exporter.address().getPort());
                System.out.printf("[kafka-demo] exporter: %d watermark refreshes, %d directory requests, %.1f Admin requests/s%n",
                        exporter.refreshes(), exporter.directoryRequests(), exporter.adminRequestsPerSecond());
                if (failures > 0) {
                    System.out.println("[kafka-demo] FAILED: " + failures + " mismatches");
                    System.exit(1);
                }
            }
            if (keepRunning) {
                keepServing(bootstrap, logDirs);
            }
        }
        System.out.println("[kafka-demo] OK");
    }

    /** Keeps the broker (and its 20,000 records) until Ctrl-C, saying how to run the exporter and a consumer on it. */
    private static void keepServing(String bootstrap, String logDirs) throws InterruptedException {
        System.out.println("[kafka-demo] broker kept running (Ctrl-C to stop), topic " + TOPIC + " with " + RECORDS + " records. Try:");
        System.out.println("  ./mvnw -B -q -pl rdma-kafka-transport -am package -DskipTests   # once, in another terminal: the exporter jar");
        System.out.println("  java --enable-native-access=ALL-UNNAMED -jar rdma-kafka-transport/target/rdma-kafka-transport-0.1.0-SNAPSHOT-exporter.jar \\");
        System.out.println("    rdma.exporter.log.dirs=" + logDirs + " rdma.exporter.bootstrap.servers=" + bootstrap
                + " rdma.exporter.listen.address=127.0.0.1:9299");
        System.out.println("  and a consumer with bootstrap.servers=" + bootstrap + ", rdma.fetch.enabled=true,"
                + " rdma.exporter.address=127.0.0.1:9299, auto.offset.reset=earliest");
        Thread.currentThread().join();
    }

    private static KafkaClusterTestKit startBroker() throws Exception {
        KafkaClusterTestKit kit = new KafkaClusterTestKit.Builder(new TestKitNodes.Builder().setCombined(true)
                .setNumBrokerNodes(1).setNumControllerNodes(1).build())
                .setConfigProp("offsets.topic.replication.factor", "1")
                .setConfigProp("offsets.topic.num.partitions", "1")
                .setConfigProp("group.initial.rebalance.delay.ms", "0")
                .build();
        // Formatting prints the whole bootstrap metadata to System.out: not what a reader of the demo needs.
        java.io.PrintStream out = System.out;
        System.setOut(new java.io.PrintStream(java.io.OutputStream.nullOutputStream()));
        try {
            kit.format();
        } finally {
            System.setOut(out);
        }
        kit.startup();
        kit.waitForReadyBrokers();
        return kit;
    }

    private static void createTopic(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(TOPIC, PARTITIONS, (short) 1))).all().get();
            // Only the partition leader answers ListOffsets: once it does, producing cannot meet NOT_LEADER.
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                latest.put(new TopicPartition(TOPIC, p), OffsetSpec.latest());
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (true) {
                try {
                    admin.listOffsets(latest).all().get();
                    break;
                } catch (ExecutionException e) {
                    // The Admin client's metadata may not know the new topic yet.
                    if (!(e.getCause() instanceof RetriableException) || System.nanoTime() > deadline) {
                        throw e;
                    }
                    Thread.sleep(50);
                }
            }
        }
    }

    private static void produce(String bootstrap) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "5");
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < RECORDS; i++) {
                acks.add(producer.send(new ProducerRecord<>(TOPIC, "key-" + i, valueOf("key-" + i))));
            }
        }
        for (Future<RecordMetadata> ack : acks) {
            ack.get();
        }
        System.out.println("[kafka-demo] produced " + RECORDS + " records to " + PARTITIONS + " partitions");
    }

    private static String valueOf(String key) {
        return "value of " + key + " " + "x".repeat(200);
    }

    private static int consumeAndVerify(String bootstrap, String exporterAddress) {
        // Properties alone, as a framework would pass them: the factory picks the RDMA consumer.
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", "rdma-demo-group");
        props.put("auto.offset.reset", "earliest");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("rdma.fetch.enabled", "true");
        props.put("rdma.exporter.address", exporterAddress);
        int failures = 0;
        long started = System.nanoTime();
        try (Consumer<String, String> consumer = RdmaConsumerFactory.create(props, null, null)) {
            consumer.subscribe(List.of(TOPIC));
            Map<Integer, Long> nextOffset = new HashMap<>();
            int received = 0;
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (received < RECORDS && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    long expected = nextOffset.getOrDefault(r.partition(), 0L);
                    if (r.offset() != expected || !valueOf(r.key()).equals(r.value())) {
                        failures++;
                    }
                    nextOffset.put(r.partition(), r.offset() + 1);
                    received++;
                }
            }
            consumer.commitSync();
            if (received != RECORDS) {
                failures += Math.abs(RECORDS - received);
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.printf("[kafka-demo] consumer %s received %d records in %.2f s, offsets contiguous and values intact: %s%n",
                    consumer.getClass().getSimpleName(), received, seconds, failures == 0);
            if (consumer instanceof RdmaKafkaConsumer<String, String> rdma) {
                var reads = rdma.transportMetrics().snapshot(OperationType.READ);
                String how = readsBy(rdma.providerSelection().provider());
                System.out.printf("[kafka-demo] %d of %d records came by %s: %d reads, %d bytes%n",
                        rdmaRecords(rdma), received, how, reads.count(), reads.bytes());
                if (reads.count() == 0 || rdmaRecords(rdma) == 0) {
                    System.out.println("[kafka-demo] no record was fetched by " + how);
                    failures++;
                }
                long fallback = received - rdmaRecords(rdma);
                String provider = rdma.providerSelection().provider();
                report(rdma.providerSelection().toString(), String.format("%,d records, %,d KB", received, reads.bytes() / 1000),
                        ("verbs".equals(provider) ? "RDMA READ" : "emulated READ (" + provider + ")")
                                + (fallback > 0 ? "; " + fallback + " by Kafka fetch (fallback)" : ""),
                        failures == 0 ? "OK, offsets and values intact" : "FAILED: " + failures + " mismatches");
            } else {
                failures++;
            }
        }
        return failures;
    }

    /** Records the consumer read by RDMA, as its {@code metrics()} report them to any Kafka metrics reporter. */
    static long rdmaRecords(Consumer<?, ?> consumer) {
        return consumer.metrics().entrySet().stream()
                .filter(e -> e.getKey().group().equals("consumer-rdma-fetch-metrics") && e.getKey().name().equals("records-rdma-total")
                        && !e.getKey().tags().containsKey("topic"))
                .mapToLong(e -> ((Number) e.getValue().metricValue()).longValue()).sum();
    }

    /** This demo's row of the table that {@code -Pdemo} ends with (samples/demo-summary), when run there. */
    static void report(String... columns) {
        String file = System.getProperty("demo.result");
        if (file != null) {
            try {
                Files.writeString(Path.of(file), "kafka-demo\t" + String.join("\t", columns));
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }

    /** Only verbs does RDMA; the tcp provider emulates the same one-sided READ in software. */
    private static String readsBy(String provider) {
        return "verbs".equals(provider) ? "RDMA READ" : "one-sided READ over the " + provider
                + " provider (software emulation)";
    }
}
