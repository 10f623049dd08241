package io.rdma4j.it.kafka;

import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
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
    void rdmaVersusPlain() throws Exception {
        try (BenchBroker broker = new BenchBroker()) {
            broker.createTopics(new NewTopic("bulk", 1, (short) 1), new NewTopic("latency", 1, (short) 1));
            produceBulk(broker.bootstrap());
            // Warm-up of both paths, then the measured runs.
            throughput(broker, false, 20_000);
            throughput(broker, true, 20_000);
            Run plainT = throughput(broker, false, RECORDS);
            Run rdmaT = throughput(broker, true, RECORDS);
            long adminBefore = broker.exporter.adminRequests();
            long t0 = System.nanoTime();
            long[] plainL = latency(broker, false);
            long[] rdmaL = latency(broker, true);
            double adminRate = (broker.exporter.adminRequests() - adminBefore) / ((System.nanoTime() - t0) / 1e9);
            print("plain KafkaConsumer", plainT, plainL);
            print("RDMA (tcp provider)", rdmaT, rdmaL);
            System.out.printf("ratios RDMA/plain: throughput %.2fx, consumer-thread CPU/MB %.2fx, process CPU/MB %.2fx, p50 %.2fx, p99 %.2fx%n",
                    rdmaT.mbPerSec() / plainT.mbPerSec(), rdmaT.threadCpuMsPerMb() / plainT.threadCpuMsPerMb(),
                    rdmaT.processCpuMsPerMb() / plainT.processCpuMsPerMb(),
                    (double) rdmaL[0] / plainL[0], (double) rdmaL[1] / plainL[1]);
            System.out.printf("exporter: watermark interval %s ms, %.1f admin requests/s, %d remaps%n",
                    broker.watermarkIntervalMs, adminRate, broker.exporter.remaps());
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

    private static Run throughput(BenchBroker broker, boolean rdma, int records) {
        var threads = ManagementFactory.getThreadMXBean();
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        try (Consumer<byte[], byte[]> c = broker.consumer(rdma)) {
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
            return new Run(rdma ? "rdma" : "plain", mb / secs, threadMs / mb, procMs / mb, 0, 0);
        }
    }

    /** Paced single-record sends (1 per ms); each value carries its send time. */
    private static long[] latency(BenchBroker broker, boolean rdma) throws Exception {
        long[] samples = new long[LATENCY_RECORDS];
        try (Consumer<byte[], byte[]> c = broker.consumer(rdma);
             KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.of("bootstrap.servers", broker.bootstrap(), "linger.ms", "0",
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
