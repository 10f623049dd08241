package io.rdma4j.it.kafka;

import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.MixedWorkload;
import jdk.jfr.Recording;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Raw read throughput of the RDMA consumer (tcp provider) against a plain KafkaConsumer on a mixed workload:
 * 6 partitions, keys, 1–3 headers, values ~80 % around 1 KiB, ~15 % of 1 B–64 KiB, ~5 % empty, in an
 * uncompressed and an lz4 topic. The RDMA consumer runs twice: decoding read-ahead batches on its decoder thread
 * (the default), and with {@code rdma.fetch.decode.ahead=false}. All deserialise to byte arrays and sum key and value
 * sizes; each round reads with every consumer, starting with the next one, and the median round counts. Broker,
 * exporter and consumer share this JVM: process CPU includes the broker and the exporter, consumer-thread CPU is
 * only the thread calling poll() (so not the decoder thread).
 * {@code -Dbench.jfr=DIR} records one further RDMA read of each topic with JFR (1 ms samples) into DIR.
 */
class KafkaMixedWorkloadBenchmark {

    static final int RECORDS = Integer.getInteger("bench.mixed.records", 100_000);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 5);
    /**
     * Reads of each topic by each variant before the measured rounds, while the JIT compiles their paths: after one,
     * the JIT compilers still took 100–250 ms of a round's CPU (about half a round's wall time on 2 cores).
     */
    static final int WARM_UP_READS = Integer.getInteger("bench.warmup", 5);
    static final int PARTITIONS = 6;
    static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    /** The consumers compared: plain KafkaConsumer, and the RDMA consumer decoding ahead, on the polling thread, or as by default. */
    enum Variant {
        PLAIN("plain KafkaConsumer", false, Map.of()),
        RDMA("RDMA (tcp), decoding ahead", true, Map.of("rdma.fetch.decode.ahead", "true")),
        RDMA_POLL_THREAD("RDMA (tcp), decoding on poll", true, Map.of("rdma.fetch.decode.ahead", "false")),
        /** The consumer's default: one of the two above, by the number of processors. */
        RDMA_DEFAULT("RDMA (tcp), default decoding", true, Map.of());

        final String label;
        final boolean rdma;
        final Map<String, Object> properties;

        Variant(String label, boolean rdma, Map<String, Object> properties) {
            this.label = label;
            this.rdma = rdma;
            this.properties = properties;
        }
    }

    /** One read of a whole topic: its figures, and CPU by thread name (digits dropped) while it ran. */
    record Round(double mbPerSec, double threadCpuMsPerMb, double processCpuMsPerMb, double mb, Map<String, Long> cpuByThread) {
    }

    @Test
    void rdmaVersusPlainOnMixedRecords() throws Exception {
        try (BenchBroker broker = new BenchBroker()) {
            List<String> topics = List.of("mixed-uncompressed", "mixed-lz4");
            for (String topic : topics) {
                String topicCodec = topic.substring("mixed-".length());
                broker.createTopics(new NewTopic(topic, PARTITIONS, (short) 1).configs(Map.of("compression.type", topicCodec)));
                long t0 = System.nanoTime();
                long bytes = MixedWorkload.produce(broker.bootstrap(), topic, topicCodec.equals("uncompressed") ? "none" : topicCodec,
                        RECORDS, Map.of());
                System.out.printf("produced %s: %d records, %.1f MB of keys and values in %.1f s%n",
                        topic, RECORDS, bytes / 1e6, (System.nanoTime() - t0) / 1e9);
            }
            Variant[] variants = {Variant.PLAIN, Variant.RDMA, Variant.RDMA_POLL_THREAD};
            for (String topic : topics) {
                Map<Variant, List<Round>> rounds = new java.util.EnumMap<>(Variant.class);
                for (int w = 0; w < WARM_UP_READS; w++) {
                    for (Variant v : variants) {
                        read(broker, topic, v); // warm-up of every path on this topic
                    }
                }
                for (Variant v : variants) {
                    rounds.put(v, new ArrayList<>());
                }
                for (int i = 0; i < ROUNDS; i++) {
                    for (int k = 0; k < variants.length; k++) { // each round starts with the next variant
                        Variant v = variants[(i + k) % variants.length];
                        rounds.get(v).add(read(broker, topic, v));
                    }
                }
                report(topic, rounds);
            }
            String jfrDir = System.getProperty("bench.jfr");
            if (jfrDir != null && !jfrDir.isBlank()) {
                Files.createDirectories(Path.of(jfrDir));
                for (String topic : topics) {
                    try (Recording recording = new Recording()) {
                        recording.enable("jdk.ExecutionSample").withPeriod(Duration.ofMillis(1));
                        recording.enable("jdk.NativeMethodSample").withPeriod(Duration.ofMillis(1));
                        recording.enable("jdk.ThreadPark").withThreshold(Duration.ofNanos(0)).withStackTrace();
                        recording.enable("jdk.JavaMonitorWait").withThreshold(Duration.ofNanos(0)).withStackTrace();
                        recording.enable("jdk.SocketRead").withThreshold(Duration.ofNanos(0)).withStackTrace();
                        recording.start();
                        read(broker, topic, Variant.RDMA_DEFAULT);
                        recording.stop();
                        Path file = Path.of(jfrDir, "rdma-" + topic + ".jfr");
                        recording.dump(file);
                        System.out.println("JFR of one RDMA read of " + topic + ": " + file.toAbsolutePath());
                    }
                }
            }
        }
    }

    static void report(String topic, Map<Variant, List<Round>> rounds) {
        Round p = median(rounds.get(Variant.PLAIN));
        System.out.printf("%s, %.1f MB, median of %d rotating rounds:%n", topic, p.mb(), rounds.get(Variant.PLAIN).size());
        rounds.forEach((v, list) -> {
            Round r = median(list);
            System.out.printf("  %-30s %7.1f MB/s (rounds %s)  consumer-thread CPU %6.2f ms/MB  process CPU %6.2f ms/MB%n",
                    v.label, r.mbPerSec(), rates(list), r.threadCpuMsPerMb(), r.processCpuMsPerMb());
        });
        rounds.forEach((v, list) -> {
            Round r = median(list);
            if (v != Variant.PLAIN) {
                System.out.printf("  ratios %s / plain: throughput %.2fx, consumer-thread CPU/MB %.2fx, process CPU/MB %.2fx%n", v.label,
                        r.mbPerSec() / p.mbPerSec(), r.threadCpuMsPerMb() / p.threadCpuMsPerMb(), r.processCpuMsPerMb() / p.processCpuMsPerMb());
            }
        });
        rounds.forEach((v, list) -> System.out.printf("  CPU ms by thread in the median round, %s: %s%n", v.label, ThreadCpu.top(median(list).cpuByThread())));
    }

    private static Round median(List<Round> rounds) {
        List<Round> sorted = rounds.stream().sorted(Comparator.comparingDouble(Round::mbPerSec)).toList();
        return sorted.get(sorted.size() / 2);
    }

    private static String rates(List<Round> rounds) {
        return rounds.stream().map(r -> String.format("%.0f", r.mbPerSec())).toList().toString();
    }

    private static Round read(BenchBroker broker, String topic, Variant variant) {
        return read(broker, topic, variant, PARTITIONS, RECORDS);
    }

    /** One read of {@code records} records of a topic of {@code partitions} partitions. */
    static Round read(BenchBroker broker, String topic, Variant variant, int partitions, int records) {
        try (Consumer<byte[], byte[]> c = broker.consumer(variant.rdma, variant.properties)) {
            ThreadCpu threads0 = ThreadCpu.now();
            long cpu0 = THREADS.getCurrentThreadCpuTime();
            long proc0 = OS.getProcessCpuTime();
            MixedWorkload.Read read = MixedWorkload.readAll(c, topic, partitions, records, Duration.ofMinutes(5));
            double threadMs = (THREADS.getCurrentThreadCpuTime() - cpu0) / 1e6;
            double procMs = (OS.getProcessCpuTime() - proc0) / 1e6;
            Map<String, Long> byThread = threads0.byNameSince();
            double mb = read.bytes() / 1e6;
            if (c instanceof RdmaKafkaConsumer<byte[], byte[]> r) {
                assertThat(KafkaFixtures.rdmaRecords(r)).as("records read by RDMA").isPositive();
                if (KafkaFixtures.rdmaRecords(r) != records) {
                    System.out.printf("  note: %d of %d records of %s came by RDMA, the rest through Kafka%n", KafkaFixtures.rdmaRecords(r), records, topic);
                }
            }
            return new Round(read.mbPerSec(), threadMs / mb, procMs / mb, mb, byThread);
        }
    }
}
