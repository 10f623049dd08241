package io.rdma4j.it.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Same broker, same data, same run: consumer throughput, consumer CPU per MB and produce-to-consume
 * latency of the RDMA path (tcp provider) against a plain KafkaConsumer. Broker, exporter and consumer
 * share this JVM, so process CPU includes the broker; the consumer-thread CPU is the client's own share.
 */
class KafkaRdmaBenchmark {

    static final int RECORDS = Integer.getInteger("bench.records", 100_000);
    static final int SIZE = Integer.getInteger("bench.size", 1024);
    static final int LATENCY_RECORDS = Integer.getInteger("bench.latency.records", 2000);

    record Run(String name, double mbPerSec, double threadCpuMsPerMb, double processCpuMsPerMb, long p50us, long p99us) {
    }

    @Test
    @SuppressWarnings("try") // KafkaClusterTestKit.close() declares Exception; the test passes everything on
    void rdmaVersusPlain() throws Exception {
        try (KafkaClusterTestKit kit = new KafkaClusterTestKit.Builder(new TestKitNodes.Builder().setCombined(true)
                .setNumBrokerNodes(1).setNumControllerNodes(1).build())
                .setConfigProp("offsets.topic.replication.factor", "1")
                .setConfigProp("transaction.state.log.replication.factor", "1")
                .setConfigProp("transaction.state.log.min.isr", "1").build()) {
            kit.format();
            kit.startup();
            kit.waitForReadyBrokers();
            Map<String, Object> ex = new HashMap<>();
            ex.put(ExporterConfig.LOG_DIRS, String.join(",", kit.nodes().brokerNodes().values().iterator().next().logDataDirectories()));
            ex.put(ExporterConfig.BOOTSTRAP, kit.bootstrapServers());
            ex.put(ExporterConfig.LISTEN, "127.0.0.1:0");
            ex.put(ExporterConfig.INTERVAL, System.getProperty("bench.watermark.interval.ms", "5"));
            ex.put("rdma.provider", "tcp");
            try (Admin admin = Admin.create(Map.of("bootstrap.servers", kit.bootstrapServers()));
                 LogExporter exporter = LogExporter.start(ExporterConfig.fromProperties(ex))) {
                admin.createTopics(List.of(new NewTopic("bulk", 1, (short) 1), new NewTopic("latency", 1, (short) 1))).all().get();
                produceBulk(kit.bootstrapServers());
                String address = "127.0.0.1:" + exporter.address().getPort();
                // Warm-up of both paths, then the measured runs.
                throughput(kit.bootstrapServers(), null, 20_000);
                throughput(kit.bootstrapServers(), address, 20_000);
                Run plainT = throughput(kit.bootstrapServers(), null, RECORDS);
                Run rdmaT = throughput(kit.bootstrapServers(), address, RECORDS);
                long adminBefore = exporter.adminRequests();
                long t0 = System.nanoTime();
                long[] plainL = latency(kit.bootstrapServers(), null, "plain");
                long[] rdmaL = latency(kit.bootstrapServers(), address, "rdma");
                double adminRate = (exporter.adminRequests() - adminBefore) / ((System.nanoTime() - t0) / 1e9);
                print("plain KafkaConsumer", plainT, plainL);
                print("RDMA (tcp provider)", rdmaT, rdmaL);
                System.out.printf("ratios RDMA/plain: throughput %.2fx, consumer-thread CPU/MB %.2fx, process CPU/MB %.2fx, p50 %.2fx, p99 %.2fx%n",
                        rdmaT.mbPerSec() / plainT.mbPerSec(), rdmaT.threadCpuMsPerMb() / plainT.threadCpuMsPerMb(),
                        rdmaT.processCpuMsPerMb() / plainT.processCpuMsPerMb(),
                        (double) rdmaL[0] / plainL[0], (double) rdmaL[1] / plainL[1]);
                System.out.printf("exporter: watermark interval %s ms, %.1f admin requests/s, %d remaps%n",
                        ex.get(ExporterConfig.INTERVAL), adminRate, exporter.remaps());
            }
        }
    }

    private static void print(String name, Run t, long[] l) {
        System.out.printf("%-22s %8.1f MB/s  consumer-thread CPU %6.2f ms/MB  process CPU %6.2f ms/MB  latency p50 %6d us  p99 %6d us%n",
                name, t.mbPerSec(), t.threadCpuMsPerMb(), t.processCpuMsPerMb(), l[0], l[1]);
    }

    private static void produceBulk(String bootstrap) {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap, "linger.ms", "10",
                "batch.size", "262144", "key.serializer", ByteArraySerializer.class, "value.serializer", ByteArraySerializer.class))) {
            byte[] value = new byte[SIZE];
            Arrays.fill(value, (byte) 'x');
            for (int i = 0; i < RECORDS; i++) {
                p.send(new ProducerRecord<>("bulk", value));
            }
            p.flush();
        }
    }

    private static Consumer<byte[], byte[]> consumer(String bootstrap, String exporter) {
        Map<String, Object> c = new HashMap<>();
        c.put("bootstrap.servers", bootstrap);
        c.put("enable.auto.commit", "false");
        c.put("max.poll.records", "2000");
        c.put("rdma.fetch.enabled", exporter != null);
        if (exporter != null) {
            c.put("rdma.exporter.address", exporter);
            c.put("rdma.provider", "tcp");
            c.put("rdma.fetch.poll.interval.ms", "1");
        }
        return RdmaConsumerFactory.create(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private static Run throughput(String bootstrap, String exporter, int records) {
        var threads = ManagementFactory.getThreadMXBean();
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        try (Consumer<byte[], byte[]> c = consumer(bootstrap, exporter)) {
            TopicPartition tp = new TopicPartition("bulk", 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            c.position(tp);
            long bytes = 0;
            int n = 0;
            long cpu0 = threads.getCurrentThreadCpuTime();
            long proc0 = os.getProcessCpuTime();
            long t0 = System.nanoTime();
            while (n < records) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    bytes += r.value().length;
                    n++;
                }
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            double mb = bytes / 1e6;
            double threadMs = (threads.getCurrentThreadCpuTime() - cpu0) / 1e6;
            double procMs = (os.getProcessCpuTime() - proc0) / 1e6;
            if (c instanceof RdmaKafkaConsumer<byte[], byte[]> r) {
                assertThat(r.transportMetrics().snapshot(OperationType.READ).bytes()).as("RDMA READ bytes").isPositive();
            }
            return new Run(exporter == null ? "plain" : "rdma", mb / secs, threadMs / mb, procMs / mb, 0, 0);
        }
    }

    /** Paced single-record sends (1 per ms); each value carries its send time. */
    private static long[] latency(String bootstrap, String exporter, String tag) throws Exception {
        long[] samples = new long[LATENCY_RECORDS];
        try (Consumer<byte[], byte[]> c = consumer(bootstrap, exporter);
             KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap, "linger.ms", "0",
                     "key.serializer", ByteArraySerializer.class, "value.serializer", ByteArraySerializer.class))) {
            TopicPartition tp = new TopicPartition("latency", 0);
            c.assign(List.of(tp));
            c.seekToEnd(List.of(tp));
            c.position(tp);
            Thread sender = Thread.ofPlatform().start(() -> {
                for (int i = 0; i < LATENCY_RECORDS; i++) {
                    p.send(new ProducerRecord<>("latency", ByteBuffer.allocate(8).putLong(System.nanoTime()).array()));
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            int n = 0;
            while (n < LATENCY_RECORDS) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    samples[n++] = (System.nanoTime() - ByteBuffer.wrap(r.value()).getLong()) / 1000;
                }
            }
            sender.join();
        }
        Arrays.sort(samples);
        return new long[] {samples[samples.length / 2], samples[(int) (samples.length * 0.99)]};
    }
}
