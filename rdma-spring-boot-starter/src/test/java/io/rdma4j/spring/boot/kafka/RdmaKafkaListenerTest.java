package io.rdma4j.spring.boot.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.testsupport.kafka.KafkaBrokerProcess;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.SpringBootVersion;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.ConsumerFactory;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A real Boot application's @KafkaListener receives records its consumer fetched by RDMA READ. Runs on both Boot
 * lines, each with a real KRaft broker its own Kafka jars can run: on Boot 4 the 4.3.1 broker test kit, on Boot 3.5
 * (spring-kafka 3.3, kafka-clients 3.9) spring-kafka-test's embedded KRaft broker of that line.
 */
class RdmaKafkaListenerTest {

    private static final String TOPIC = "spring-rdma";
    private static final int RECORDS = 1000;

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class ListenerApp {
        static final List<String> values = new CopyOnWriteArrayList<>();
        static final List<Consumer<?, ?>> consumers = new CopyOnWriteArrayList<>();

        @KafkaListener(topics = TOPIC, groupId = "spring-rdma-group")
        void listen(ConsumerRecord<String, String> record, Consumer<?, ?> consumer) {
            values.add(record.value());
            if (!consumers.contains(consumer)) {
                consumers.add(consumer);
            }
        }
    }

    @Test
    void kafkaListenerReceivesRecordsFetchedByRdma() throws Exception {
        boolean boot3 = SpringBootVersion.getVersion().startsWith("3.");
        assertThat(boot3).as("Boot line of this run").isEqualTo("3".equals(System.getProperty("rdma4j.expected.boot.major")));
        try (TestBroker broker = boot3 ? Boot3Broker.start() : KitBroker.start()) {
            String bootstrap = broker.bootstrap();
            KafkaFixtures.createTopic(bootstrap, TOPIC, 2);
            KafkaFixtures.produceKeyed(bootstrap, TOPIC, RECORDS);
            String logDirs = logDirs(bootstrap);
            try (LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(Map.of(
                    ExporterConfig.LOG_DIRS, logDirs, ExporterConfig.BOOTSTRAP, bootstrap,
                    ExporterConfig.LISTEN, "127.0.0.1:0", ExporterConfig.INTERVAL, "20", "rdma.provider", "tcp")));
                 ConfigurableApplicationContext context = new SpringApplicationBuilder(ListenerApp.class)
                         .web(WebApplicationType.NONE)
                         .properties("spring.kafka.bootstrap-servers=" + bootstrap,
                                 "spring.kafka.consumer.auto-offset-reset=earliest",
                                 "spring.kafka.consumer.properties.rdma.fetch.enabled=true",
                                 "spring.kafka.consumer.properties.rdma.exporter.address=127.0.0.1:" + exporter.address().getPort(),
                                 "spring.kafka.consumer.properties.rdma.provider=tcp",
                                 // The consumer waits for its exporter connection: every record is RDMA's.
                                 "spring.kafka.consumer.properties.rdma.fetch.setup.wait.ms=30000")
                         .run()) {
                ConsumerFactory<?, ?> factory = context.getBean(ConsumerFactory.class);
                assertThat(factory).isInstanceOf(RdmaKafkaConsumerFactoryPostProcessor.RdmaConsumerFactoryAdapter.class);
                long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                while (ListenerApp.values.size() < RECORDS && System.nanoTime() < deadline) {
                    Thread.sleep(50);
                }
                assertThat(ListenerApp.values).hasSize(RECORDS);
                assertThat(ListenerApp.values).containsExactlyInAnyOrderElementsOf(
                        java.util.stream.IntStream.range(0, RECORDS).mapToObj(i -> "value-" + i).toList());
                assertThat(ListenerApp.consumers).hasSize(1);
                assertThat(ListenerApp.consumers.getFirst()).as("the listener container's consumer").isInstanceOf(RdmaKafkaConsumer.class);
                RdmaKafkaConsumer<?, ?> rdma = (RdmaKafkaConsumer<?, ?>) ListenerApp.consumers.getFirst();
                assertThat(rdma.transportMetrics().snapshot(OperationType.READ).count()).as("RDMA READs").isPositive();
                assertThat(KafkaFixtures.rdmaRecords(rdma)).as("records fetched by RDMA").isEqualTo(RECORDS);
            }
        }
    }

    /** A single-node KRaft broker that the current line's Kafka jars can run in this JVM. */
    interface TestBroker extends AutoCloseable {
        String bootstrap();

        @Override
        void close();
    }

    /** Boot 4 line: Kafka's own 4.3.1 test kit, in this JVM. */
    static final class KitBroker implements TestBroker {
        private final KafkaTestCluster cluster;

        private KitBroker(KafkaTestCluster cluster) {
            this.cluster = cluster;
        }

        static KitBroker start() throws Exception {
            return new KitBroker(new KafkaTestCluster());
        }

        @Override
        public String bootstrap() {
            return cluster.bootstrap();
        }

        @Override
        public void close() {
            cluster.close();
        }
    }

    /** Boot 3.5 line: a 4.3.1 broker process on the class path the build wrote (the broker kit's jars). */
    static final class Boot3Broker implements TestBroker {
        private final KafkaBrokerProcess process;

        private Boot3Broker(KafkaBrokerProcess process) {
            this.process = process;
        }

        static Boot3Broker start() throws Exception {
            Path classPathFile = Path.of(System.getProperty("rdma4j.brokerClassPathFile", "(rdma4j.brokerClassPathFile not set)"));
            assertThat(classPathFile).as("the broker class path the build wrote").isRegularFile();
            Path clients = Path.of(System.getProperty("rdma4j.brokerClientsJar", "(rdma4j.brokerClientsJar not set)"));
            assertThat(clients).as("the broker kit's own kafka-clients jar").isRegularFile();
            Path dir = Files.createTempDirectory("boot3-kafka");
            return new Boot3Broker(KafkaBrokerProcess.start(dir, "boot3-listener-broker", Map.of("offsets.topic.num.partitions", "1"),
                    Files.readString(classPathFile).strip() + java.io.File.pathSeparator + clients));
        }

        @Override
        public String bootstrap() {
            return process.bootstrapServers();
        }

        @Override
        public void close() {
            process.close();
        }
    }

    /** The broker's log directories as the Admin API reports them: what the exporter maps. */
    private static String logDirs(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            int node = admin.describeCluster().nodes().get().iterator().next().id();
            Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(List.of(node)).allDescriptions().get();
            assertThat(dirs.get(node)).as("log directories of node %s", node).isNotEmpty();
            return String.join(",", dirs.get(node).keySet());
        }
    }
}
