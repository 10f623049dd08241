package io.rdma4j.it.lab.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.it.lab.LabDevice;
import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.testsupport.kafka.KafkaFixtures.Seen;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Inside the soft-RDMA lab: a KRaft cluster of two brokers, each advertising one of the lab device's two addresses,
 * a log exporter per broker on the verbs provider listening on its broker's address and one shared port, and an
 * RdmaKafkaConsumer created from properties on the verbs provider with that port and no exporter address. It must
 * return exactly what a plain KafkaConsumer returns (offsets, keys, values, headers, timestamps, in order) over two
 * partitions, led by different brokers, whose logs rolled a segment, every record by RDMA READ over verbs from the
 * exporter of its partition's leader: a consumer that fell back to the normal fetch path for any record, read a
 * partition from the other broker's exporter, or ran on another provider, fails.
 */
class RdmaConsumerOverRxeGuestTest {

    private static final int PARTITIONS = 2;
    private static final int RECORDS = 3000;
    private static final int VALUE_SIZE = 1000;
    // Kafka 4's smallest segment.bytes; 1500 records of ~1 KiB per partition roll each log once.
    private static final String SEGMENT_BYTES = "1048576";
    // The emulated CPU is 10-30x slower than the host: waits are long, failures still surface.
    static final Duration WAIT = Duration.ofMinutes(5);
    static final String TIMEOUT_MS = Long.toString(Duration.ofMinutes(2).toMillis());

    @Test
    void rdmaConsumerOnVerbsReturnsWhatPlainConsumerReturnsAcrossSegmentRolls() throws Exception {
        LabDevice device = LabDevice.current();
        List<String> hosts = List.of(device.address(), device.secondAddress());
        // A broker heartbeat delayed by the slow guest must not fence a broker.
        try (KafkaTestCluster cluster = KafkaTestCluster.brokersOn(hosts, Map.of("broker.session.timeout.ms", "60000"));
             // The guest kernel (6.1) refuses read-only file mappings: RdmaTransport.registerFile maps segments writable there.
             LogExporter first = startExporter(cluster, 0, hosts.get(0), 0);
             LogExporter second = startExporter(cluster, 1, hosts.get(1), first.address().getPort());
             Admin admin = Admin.create(Map.of("bootstrap.servers", cluster.bootstrap(),
                     "default.api.timeout.ms", TIMEOUT_MS, "request.timeout.ms", TIMEOUT_MS))) {
            List<LogExporter> exporters = List.of(first, second);
            int port = first.address().getPort();
            for (int broker = 0; broker < hosts.size(); broker++) {
                LogExporter exporter = exporters.get(broker);
                assertThat(exporter.transport().selection().provider()).as("the exporter's provider").isEqualTo("verbs");
                assertThat(exporter.address()).as("exporter of broker %d on %s", broker, device.name())
                        .isEqualTo(new InetSocketAddress(hosts.get(broker), port));
            }
            String topic = "rxe-flow";
            // Partition p on broker p: each exporter serves one partition, the other's log is not on its broker.
            admin.createTopics(List.of(new NewTopic(topic, Map.of(0, List.of(0), 1, List.of(1)))
                    .configs(Map.of("segment.bytes", SEGMENT_BYTES)))).all().get();
            List<TopicPartition> partitions = IntStream.range(0, PARTITIONS).mapToObj(p -> new TopicPartition(topic, p)).toList();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            partitions.forEach(tp -> latest.put(tp, OffsetSpec.latest()));
            KafkaFixtures.awaitLeaders(admin, latest);

            Map<TopicPartition, Long> ends = produce(cluster.bootstrap(), topic);
            for (TopicPartition tp : partitions) {
                assertThat(segmentFiles(cluster, tp)).as(tp + " rolled at least one segment").hasSizeGreaterThanOrEqualTo(2);
                awaitExported(exporters.get(tp.partition()), tp, ends.get(tp));
            }

            Map<String, Object> consumer = consumerProps(cluster.bootstrap());
            List<Seen> plain;
            try (Consumer<String, String> c = new KafkaConsumer<>(consumer, new StringDeserializer(), new StringDeserializer())) {
                plain = consume(c, partitions);
            }
            assertThat(plain).as("the plain consumer read every record").hasSize(RECORDS);
            for (TopicPartition tp : partitions) {
                assertThat(plain.stream().filter(s -> s.partition() == tp.partition()).map(Seen::offset).toList())
                        .as("the plain consumer read " + tp + " in offset order")
                        .isEqualTo(java.util.stream.LongStream.range(0, ends.get(tp)).boxed().toList());
            }

            Map<String, Object> rdma = new HashMap<>(consumer);
            rdma.put("rdma.fetch.enabled", "true");
            rdma.put("rdma.exporter.port", Integer.toString(port)); // No address: each partition from its leader's exporter.
            rdma.putAll(verbsTransport(device));
            // The consumer waits for its exporter connections: every record is RDMA's.
            rdma.putAll(KafkaFixtures.waitingForRdma(Map.of()));
            try (Consumer<String, String> c = RdmaConsumerFactory.create(rdma, null, null)) {
                RdmaKafkaConsumer<String, String> r = (RdmaKafkaConsumer<String, String>) c;
                assertThat(r.rdmaActive()).as("the consumer opened its RDMA transport").isTrue();
                assertThat(r.providerSelection().provider()).as("the consumer's provider").isEqualTo("verbs");

                List<Seen> got = consume(c, partitions);

                var read = r.transportMetrics().snapshot(OperationType.READ);
                long logBytes = 0;
                for (TopicPartition tp : partitions) {
                    for (Path segment : segmentFiles(cluster, tp)) {
                        logBytes += Files.size(segment);
                    }
                }
                // The lab test's console log keeps this line: the numbers behind "by RDMA READ over verbs".
                System.out.printf("LAB-KAFKA: %s on %s (brokers on %s): %d records, %d by RDMA; RDMA READ %d ops, %d bytes"
                                + " (log %d bytes); retries %d, CRC failures %d; exporter remaps %d and %d%n",
                        r.providerSelection(), device.name(), hosts, got.size(), KafkaFixtures.rdmaRecords(r), read.count(),
                        read.bytes(), logBytes, KafkaFixtures.rdmaRetries(r), KafkaFixtures.crcFailures(r), first.remaps(), second.remaps());
                for (TopicPartition tp : partitions) {
                    assertThat(r.rdmaExporterOf(tp)).as("the exporter %s was read from", tp)
                            .isEqualTo(new InetSocketAddress(hosts.get(tp.partition()), port));
                }

                assertThat(got).as("the RDMA consumer returns exactly what the plain consumer returns").isEqualTo(plain);
                // Any record that came through the normal fetch path (a fallback) makes this fall short.
                assertThat(KafkaFixtures.rdmaRecords(r)).as("records that came by RDMA READ").isEqualTo(RECORDS);
                assertThat(KafkaFixtures.crcFailures(r)).as("batches that failed their CRC").isZero();
                assertThat(read.count()).as("RDMA READ operations").isPositive();
                assertThat(read.bytes()).as("RDMA READ bytes cover every batch of both logs").isGreaterThanOrEqualTo(logBytes);
            }
        }
    }

    static Map<String, Object> verbsTransport(LabDevice device) {
        return verbsTransport(device, device.address());
    }

    static Map<String, Object> verbsTransport(LabDevice device, String address) {
        // The exporter listens on the device's address, not loopback: consumers prove a secret (protected mode).
        return Map.of("rdma.provider", "verbs", "rdma.device", device.name(), "rdma.address", address,
                "rdma.operation-timeout", "90s", "rdma.shared-secret", "the lab's Kafka secret, 16+ bytes");
    }

    /** Broker {@code broker}'s exporter on the verbs provider at {@code host:port}. */
    private static LogExporter startExporter(KafkaTestCluster cluster, int broker, String host, int port) {
        Map<String, Object> props = new HashMap<>(cluster.exporterProps(broker, host + ":" + port));
        props.putAll(verbsTransport(LabDevice.current(), host));
        // Fewer ListOffsets rounds than the host tests' 20 ms: each costs the emulated broker real time.
        props.put(ExporterConfig.INTERVAL, "200");
        return LogExporter.start(ExporterConfig.fromProperties(props));
    }

    /** Record i goes to partition i % 2, every 7th with a header; returns each partition's end offset. */
    private static Map<TopicPartition, Long> produce(String bootstrap, String topic) throws Exception {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Long.toString(WAIT.toMillis()));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, TIMEOUT_MS);
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (Producer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < RECORDS; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, value(i));
                if (i % 7 == 0) {
                    r.headers().add("h", ("hv" + i).getBytes(StandardCharsets.UTF_8));
                }
                acks.add(producer.send(r));
            }
            producer.flush();
        }
        Map<TopicPartition, Long> ends = new HashMap<>();
        for (Future<RecordMetadata> ack : acks) {
            RecordMetadata sent = ack.get(); // throws the send's failure, so a lost send fails here
            ends.merge(new TopicPartition(sent.topic(), sent.partition()), sent.offset() + 1, Math::max);
        }
        return ends;
    }

    private static String value(int i) {
        String prefix = "v" + i + "-";
        return prefix + "x".repeat(VALUE_SIZE - prefix.length());
    }

    /** Consume only once the exporter serves everything produced, or the consumer could legitimately fall back. */
    static void awaitExported(LogExporter exporter, TopicPartition tp, long end) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (exporter.exportedHighWatermark(tp) < end) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the exporter did not serve " + tp + " up to offset " + end + " within " + WAIT
                        + " (serves " + exporter.exportedHighWatermark(tp) + ")");
            }
            Thread.sleep(100);
        }
    }

    private static List<Path> segmentFiles(KafkaTestCluster cluster, TopicPartition tp) throws Exception {
        List<Path> out = new ArrayList<>();
        for (String dir : cluster.logDirs(tp.partition()).split(",")) {
            Path partitionDir = Path.of(dir, tp.topic() + "-" + tp.partition());
            if (Files.isDirectory(partitionDir)) {
                try (Stream<Path> files = Files.list(partitionDir)) {
                    files.filter(f -> f.getFileName().toString().endsWith(".log")).forEach(out::add);
                }
            }
        }
        return out;
    }

    private static Map<String, Object> consumerProps(String bootstrap) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, TIMEOUT_MS);
        return p;
    }

    /**
     * Every record of the partitions from the beginning, per partition in order, partitions ascending; one
     * poll more than needed shows that nothing beyond them (no duplicate) comes.
     */
    private static List<Seen> consume(Consumer<String, String> c, List<TopicPartition> partitions) {
        c.assign(partitions);
        c.seekToBeginning(partitions);
        List<Seen> all = new ArrayList<>();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (all.size() < RECORDS && System.nanoTime() < deadline) {
            c.poll(Duration.ofMillis(500)).forEach(r -> all.add(Seen.of(r)));
        }
        c.poll(Duration.ofSeconds(2)).forEach(r -> all.add(Seen.of(r)));
        all.sort(Comparator.comparingInt(Seen::partition)); // stable: keeps each partition's order
        return all;
    }
}
