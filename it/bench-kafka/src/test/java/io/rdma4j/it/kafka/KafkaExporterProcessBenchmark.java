package io.rdma4j.it.kafka;

import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.testsupport.kafka.KafkaBrokerProcess;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import io.rdma4j.testsupport.kafka.MixedWorkload;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.test.JaasUtils;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The mixed workload on three KRaft brokers (broker N advertising 127.0.0.N), each with an rdma4j log exporter in a
 * process of its own, started from the exporter jar as operators run it ({@code java --enable-native-access=ALL-UNNAMED
 * -jar rdma-kafka-transport-<version>-exporter.jar key=value ...}), all on one port. Six partitions, two replicas,
 * leaders on every broker; an uncompressed and an lz4 topic.
 *
 * <p>Every measured read uses a NEW consumer: its time runs from the consumer's construction to its last record, so
 * the consumer's start (metadata, connections to the brokers and, for RDMA, to the exporters) is counted. For the RDMA
 * consumer the time before its first record by RDMA is reported on its own. Secured, each topic is read twice over:
 * first by RDMA consumers that each create a delegation token of their own (what the first consumer of a process does),
 * then by RDMA consumers that prove the token their process's consumers share ({@code rdma.exporter.token.linger.ms}
 * at its default: the first of these creates it). Rounds alternate a plain KafkaConsumer and
 * the RDMA consumer, each round starting with the other; the median round counts and the ratios are rdma / plain.
 *
 * <p>{@code -Dbench.exporterJar=PATH} (default: rdma-kafka-transport's target), {@code -Dbench.process.records}
 * (default 30,000 per topic, 168 MB of keys and values), {@code -Dbench.rounds} (default 7), {@code -Dbench.warmup}
 * (reads by each path before the rounds, default 3).
 */
class KafkaExporterProcessBenchmark {

    static final int BROKERS = 3;
    static final int PARTITIONS = 6;
    static final int RECORDS = Integer.getInteger("bench.process.records", 30_000);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 7);
    /**
     * Reads by each path before the measured rounds: the brokers (in this JVM) and the exporter processes run long in
     * production, and their code paths are compiled. After three reads each, the JIT compilers still took 80–170 ms of
     * this JVM's CPU and 30–80 ms of the exporters' in a measured read of ~150 ms on 2 cores; after twelve, 20–70 ms
     * and up to 30 ms (the CPU by thread printed with each result shows it).
     */
    static final int WARM_UP_READS = Integer.getInteger("bench.warmup", 12);

    /**
     * One read by a new consumer: bytes, and nanoseconds from construction to the first record, first RDMA record, last
     * record; for the RDMA consumer its fallback reasons (a new one reads through Kafka while it connects).
     */
    record Run(long bytes, long firstNanos, long firstRdmaNanos, long totalNanos, long rdmaRecords, java.util.Set<String> fallbacks,
               long jvmCpuNanos, long exporterCpuNanos, Map<String, Long> cpuByThread, Map<String, Long> exporterCpuByThread) {
        double mbPerSec() {
            return bytes / 1e6 / (totalNanos / 1e9);
        }

        double afterFirstMbPerSec() {
            return bytes / 1e6 / ((totalNanos - firstNanos) / 1e9);
        }
    }

    @Test
    void newConsumersOnThreeBrokersWithExporterProcesses() throws Exception {
        try (KafkaTestCluster cluster = KafkaTestCluster.brokersOn(HOSTS, Map.of())) {
            Map<String, Object> client = Map.of("bootstrap.servers", advertised(cluster.bootstrap()));
            run(cluster, false, client, client);
        }
    }

    /**
     * The brokers by the hosts they advertise (127.0.0.1-3, where their exporters listen on one port), as operators
     * list them in {@code bootstrap.servers}: the test kit's bootstrap names each {@code localhost}, which would point
     * an RDMA consumer's first-poll connects at the first exporter only.
     */
    private static String advertised(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            return admin.describeCluster().nodes().get().stream().sorted(java.util.Comparator.comparingInt(org.apache.kafka.common.Node::id))
                    .map(n -> n.host() + ":" + n.port()).collect(java.util.stream.Collectors.joining(","));
        }
    }

    /**
     * The same on a SASL cluster with ACLs ({@link KafkaTestCluster#secured}: PLAIN and SCRAM-SHA-512, the
     * StandardAuthorizer, no access without an ACL; brokers on localhost, a port each): the reader is
     * {@code plain-user1}, allowed READ on the topics; each exporter checks ACLs ({@code rdma.exporter.acls=auto}) and
     * listens on its broker's port plus an offset; each new RDMA consumer proves a delegation token to the exporters
     * ({@code rdma.exporter.authentication=delegation-token}), created by itself or shared, inside the measured time. The brokers
     * run in this JVM, where only the loading of Kafka's ScramLoginModule registers the SCRAM SASL servers (a broker's
     * JAAS file names it; the test kit's names PLAIN only, and the SCRAM clients here are in the exporter processes),
     * so this loads it first.
     */
    @Test
    void newSecuredConsumersOnThreeBrokersWithExporterProcesses() throws Exception {
        Class.forName("org.apache.kafka.common.security.scram.ScramLoginModule", true,
                KafkaExporterProcessBenchmark.class.getClassLoader());
        try (KafkaTestCluster cluster = KafkaTestCluster.secured(BROKERS, Map.of());
             Admin admin = cluster.superAdmin()) {
            List<AclBinding> acls = new ArrayList<>();
            for (String topic : TOPICS) {
                acls.add(new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                        new AccessControlEntry("User:" + JaasUtils.KAFKA_PLAIN_USER1, "*", AclOperation.READ, AclPermissionType.ALLOW)));
            }
            admin.createAcls(acls).all().get();
            run(cluster, true, cluster.clientProps(JaasUtils.KAFKA_PLAIN_ADMIN, JaasUtils.KAFKA_PLAIN_ADMIN_PASSWORD),
                    cluster.clientProps(JaasUtils.KAFKA_PLAIN_USER1, JaasUtils.KAFKA_PLAIN_USER1_PASSWORD));
        }
    }

    /** The exporter processes of the cluster under test, whose CPU time each read reports. */
    private static volatile List<Process> EXPORTERS = List.of();
    private static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();

    private static long exporterCpuNanos() {
        return EXPORTERS.stream().mapToLong(p -> p.info().totalCpuDuration().map(Duration::toNanos).orElse(0L)).sum();
    }

    private static List<Long> exporterPids() {
        return EXPORTERS.stream().map(Process::pid).toList();
    }

    private static final List<String> HOSTS = IntStream.rangeClosed(1, BROKERS).mapToObj(n -> "127.0.0." + n).toList();
    private static final List<String> TOPICS = List.of("procs-uncompressed", "procs-lz4");

    /** Starts an exporter process per broker, produces both topics as {@code adminClient}, reads them as {@code reader}. */
    private static void run(KafkaTestCluster cluster, boolean secured, Map<String, Object> adminClient, Map<String, Object> reader)
            throws Exception {
        Path jar = Path.of(System.getProperty("bench.exporterJar",
                "../../rdma-kafka-transport/target/rdma-kafka-transport-" + System.getProperty("bench.version", "0.1.0-SNAPSHOT")
                        + "-exporter.jar")).toAbsolutePath().normalize();
        assertThat(jar).as("the exporter jar: run with -am (the package phase builds it), or -Dbench.exporterJar").isRegularFile();
        String label = secured ? "secured (SASL/SCRAM, ACLs, delegation-token proofs)" : "plain";
        Path logs = Path.of("target", "exporter-processes", secured ? "secured" : "plain").toAbsolutePath();
        Files.createDirectories(logs);
        List<Process> exporters = new ArrayList<>();
        EXPORTERS = exporters;
        try (Admin admin = Admin.create(adminClient)) {
            Map<Integer, Integer> brokerPorts = new TreeMap<>();
            admin.describeCluster().nodes().get().forEach(n -> brokerPorts.put(n.id(), n.port()));
            List<Integer> ids = List.copyOf(brokerPorts.keySet());
            int port = KafkaBrokerProcess.freePort();
            int offset = secured ? freeOffset(brokerPorts.values()) : 0;
            List<String> listening = new ArrayList<>();
            for (int b = 0; b < BROKERS; b++) {
                Path log = logs.resolve("exporter-" + b + ".log");
                Files.deleteIfExists(log);
                List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow(),
                        "--enable-native-access=ALL-UNNAMED"));
                // e.g. -Dbench.exporter.jvmArgs=-XX:StartFlightRecording=filename=/tmp/exporter.jfr to profile them
                String jvmArgs = System.getProperty("bench.exporter.jvmArgs", "").strip();
                if (!jvmArgs.isEmpty()) {
                    command.addAll(List.of(jvmArgs.replace("{n}", Integer.toString(b)).split("\\s+")));
                }
                command.addAll(List.of("-jar", jar.toString()));
                Map<String, Object> props;
                if (secured) {
                    int brokerPort = brokerPorts.get(ids.get(b));
                    props = cluster.exporterProps(ids.get(b), null);
                    props.remove("rdma.exporter.listen.address");
                    props.put("rdma.exporter.bootstrap.servers", "localhost:" + brokerPort); // its own broker
                    props.put("rdma.exporter.port.offset", Integer.toString(offset));
                    adminClient.forEach((k, v) -> props.put("rdma.exporter.admin." + k, v));
                    listening.add("127.0.0.1:" + (brokerPort + offset));
                } else {
                    props = cluster.exporterProps(ids.get(b), HOSTS.get(b) + ":" + port);
                    listening.add(HOSTS.get(b) + ":" + port);
                }
                // The exporter's default unless set: at 5 ms, the three exporters' refreshes alone took a quarter to half of a core.
                String interval = System.getProperty("bench.watermark.interval.ms");
                if (interval != null) {
                    props.put("rdma.exporter.watermark.interval.ms", interval);
                }
                props.forEach((k, v) -> command.add(k + "=" + v));
                exporters.add(new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start());
            }
            for (int b = 0; b < BROKERS; b++) {
                awaitListening(exporters.get(b), listening.get(b), logs.resolve("exporter-" + b + ".log"));
            }
            System.out.printf("%s: 3 brokers in this JVM, 3 exporter processes from %s on %s (pids %s)%n", label, jar.getFileName(),
                    listening, exporters.stream().map(Process::pid).toList());
            Map<Integer, List<Integer>> assignment = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                assignment.put(p, List.of(ids.get(p % BROKERS), ids.get((p + 1) % BROKERS)));
            }
            for (String topic : TOPICS) {
                String codec = topic.substring("procs-".length());
                admin.createTopics(List.of(new NewTopic(topic, assignment).configs(Map.of("compression.type", codec)))).all().get();
                Map<String, Object> producer = new HashMap<>(adminClient);
                producer.remove("bootstrap.servers");
                producer.put("acks", "all");
                long bytes = MixedWorkload.produce(cluster.bootstrap(), topic, codec.equals("uncompressed") ? "none" : codec, RECORDS, producer);
                System.out.printf("produced %s: %d records, %.1f MB of keys and values over %d partitions (2 replicas)%n",
                        topic, RECORDS, bytes / 1e6, PARTITIONS);
            }
            Map<String, Object> rdmaProps = new HashMap<>(reader);
            Map<String, Object> sharingProps = rdmaProps;
            if (secured) {
                rdmaProps.put("rdma.exporter.port.offset", Integer.toString(offset));
                rdmaProps.put("rdma.exporter.authentication", "delegation-token");
                // Until the last rounds of a topic, no token outlives its consumer: each creates one of its own.
                sharingProps = new HashMap<>(rdmaProps);
                rdmaProps.put("rdma.exporter.token.linger.ms", "0");
            } else {
                rdmaProps.put("rdma.exporter.port", Integer.toString(port));
            }
            for (String topic : TOPICS) {
                awaitExported(reader, rdmaProps, topic);
                for (int i = 0; i < WARM_UP_READS; i++) {
                    read(reader, rdmaProps, topic, false);
                    read(reader, rdmaProps, topic, true);
                }
                if (secured) {
                    rounds(label + ", " + topic + ", each RDMA consumer creating a token (as the first of a process does)",
                            reader, rdmaProps, topic);
                    rounds(label + ", " + topic + ", each RDMA consumer proving the token its process's consumers share",
                            reader, sharingProps, topic);
                } else {
                    rounds(label + ", " + topic, reader, rdmaProps, topic);
                }
            }
        } finally {
            for (Process e : exporters) {
                e.destroy();
            }
            for (Process e : exporters) {
                if (!e.waitFor(30, TimeUnit.SECONDS)) {
                    e.destroyForcibly();
                }
            }
        }
        System.out.printf("load average (1 min) after the %s runs: %.2f on %d cores%n", label,
                java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(),
                Runtime.getRuntime().availableProcessors());
    }

    /** Rounds alternating a plain KafkaConsumer and an RDMA consumer with {@code rdmaProps}, each round starting with the other. */
    private static void rounds(String label, Map<String, Object> reader, Map<String, Object> rdmaProps, String topic) {
        List<Run> plain = new ArrayList<>();
        List<Run> rdma = new ArrayList<>();
        for (int i = 0; i < ROUNDS; i++) {
            boolean rdmaFirst = i % 2 == 1;
            for (boolean useRdma : rdmaFirst ? new boolean[] {true, false} : new boolean[] {false, true}) {
                (useRdma ? rdma : plain).add(read(reader, rdmaProps, topic, useRdma));
            }
        }
        report(label, plain, rdma);
    }

    private static Consumer<byte[], byte[]> consumer(Map<String, Object> reader, Map<String, Object> rdmaProps, boolean rdma) {
        Map<String, Object> c = new HashMap<>(rdma ? rdmaProps : reader);
        c.put("enable.auto.commit", "false");
        c.put("max.poll.records", "2000");
        c.put("rdma.fetch.enabled", rdma);
        if (rdma) {
            c.put("rdma.provider", "tcp");
            c.put("rdma.fetch.poll.interval.ms", "1");
            String decodeAhead = System.getProperty("bench.decodeAhead"); // unset: the consumer's default
            if (decodeAhead != null) {
                c.put("rdma.fetch.decode.ahead", decodeAhead);
            }
        }
        return RdmaConsumerFactory.create(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** A new consumer reads the whole topic; the clock starts before its construction. */
    static Run read(Map<String, Object> reader, Map<String, Object> rdmaProps, String topic, boolean rdma) {
        long jvmCpu0 = OS.getProcessCpuTime();
        long exporterCpu0 = exporterCpuNanos();
        ThreadCpu threads0 = ThreadCpu.now();
        Map<String, Long> exporterThreads0 = ThreadCpu.ofProcesses(exporterPids());
        long t0 = System.nanoTime();
        try (Consumer<byte[], byte[]> c = consumer(reader, rdmaProps, rdma)) {
            List<TopicPartition> tps = IntStream.range(0, PARTITIONS).mapToObj(i -> new TopicPartition(topic, i)).toList();
            c.assign(tps);
            c.seekToBeginning(tps);
            long bytes = 0;
            int n = 0;
            long first = -1;
            long firstRdma = -1;
            long deadline = t0 + Duration.ofMinutes(2).toNanos();
            while (n < RECORDS) {
                assertThat(System.nanoTime() - deadline).as("read %d of %d records of %s within 2 min", n, RECORDS, topic).isNegative();
                var records = c.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    bytes += (r.key() == null ? 0 : r.key().length) + (r.value() == null ? 0 : r.value().length);
                    n++;
                }
                if (first < 0 && n > 0) {
                    first = System.nanoTime() - t0;
                }
                if (rdma && firstRdma < 0 && KafkaFixtures.rdmaRecords(c) > 0) {
                    firstRdma = System.nanoTime() - t0;
                }
            }
            long total = System.nanoTime() - t0;
            long byRdma = rdma ? KafkaFixtures.rdmaRecords(c) : 0;
            if (rdma) {
                assertThat(c).isInstanceOf(RdmaKafkaConsumer.class);
            }
            return new Run(bytes, first, firstRdma, total, byRdma, KafkaFixtures.fallbacks(c).keySet(),
                    OS.getProcessCpuTime() - jvmCpu0, exporterCpuNanos() - exporterCpu0, threads0.byNameSince(),
                    ThreadCpu.since(exporterThreads0, ThreadCpu.ofProcesses(exporterPids())));
        }
    }

    private static void report(String topic, List<Run> plain, List<Run> rdma) {
        Run p = median(plain);
        Run r = median(rdma);
        System.out.printf("%s, %.1f MB, new consumer per read, median of %d alternating rounds (time from construction):%n",
                topic, p.bytes() / 1e6, plain.size());
        for (var e : Map.of("plain KafkaConsumer", plain, "RDMA (tcp provider)", rdma).entrySet().stream()
                .sorted(Map.Entry.comparingByKey()).toList()) {
            Run m = median(e.getValue());
            System.out.printf("  %-20s %7.1f MB/s incl. start (rounds %s); first record after %5.0f ms%s; after the first record %7.1f MB/s; "
                            + "total %5.0f ms; CPU %4.0f ms in this JVM (brokers, consumer), %4.0f ms in the exporter processes%s%n",
                    e.getKey(), m.mbPerSec(), e.getValue().stream().map(x -> String.format("%.0f", x.mbPerSec())).toList(),
                    m.firstNanos() / 1e6,
                    m.firstRdmaNanos() >= 0 ? String.format(", first record by RDMA after %5.0f ms", m.firstRdmaNanos() / 1e6) : "",
                    m.afterFirstMbPerSec(), m.totalNanos() / 1e6, m.jvmCpuNanos() / 1e6, m.exporterCpuNanos() / 1e6,
                    e.getValue() == rdma ? String.format("; %d of %d records by RDMA (the rest through Kafka while it connected)",
                            m.rdmaRecords(), RECORDS) : "");
            System.out.printf("    CPU ms by thread in that read, this JVM: %s; exporters: %s%n", ThreadCpu.top(m.cpuByThread(), 8),
                    ThreadCpu.top(m.exporterCpuByThread(), 6));
        }
        System.out.printf("  ratios rdma / plain: throughput incl. start %.2fx; after the first record %.2fx; time to first record %.2fx%n",
                r.mbPerSec() / p.mbPerSec(), r.afterFirstMbPerSec() / p.afterFirstMbPerSec(), (double) r.firstNanos() / p.firstNanos());
    }

    private static Run median(List<Run> runs) {
        List<Run> sorted = runs.stream().sorted(Comparator.comparingDouble(Run::mbPerSec)).toList();
        return sorted.get(sorted.size() / 2);
    }

    /**
     * Until a consumer reads the topic by RDMA but for what Kafka's fetch returned while it connected: each exporter
     * finds new partitions on its next refresh (until then they fall back, not-exported).
     */
    private static void awaitExported(Map<String, Object> reader, Map<String, Object> rdmaProps, String topic) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        while (true) {
            Run probe = read(reader, rdmaProps, topic, true);
            if (probe.rdmaRecords() > 0 && java.util.Set.of("exporter-connecting").containsAll(probe.fallbacks())) {
                return;
            }
            assertThat(System.nanoTime()).as("every partition of %s exported within 90 s (%d of %d by RDMA, fallbacks %s)", topic,
                    probe.rdmaRecords(), RECORDS, probe.fallbacks()).isLessThan(deadline);
            Thread.sleep(200);
        }
    }

    /** An offset that puts every broker's exporter on a free port. */
    private static int freeOffset(java.util.Collection<Integer> brokerPorts) throws IOException {
        for (int candidate = 211; candidate < 20_000; candidate += 97) {
            List<java.net.ServerSocket> held = new ArrayList<>();
            try {
                for (int p : brokerPorts) {
                    held.add(new java.net.ServerSocket(p + candidate, 1, java.net.InetAddress.getLoopbackAddress()));
                }
                return candidate;
            } catch (IOException taken) {
                // the next offset
            } finally {
                for (java.net.ServerSocket s : held) {
                    s.close();
                }
            }
        }
        throw new IllegalStateException("no port offset leaves every broker's exporter port free");
    }

    /** Waits for the line the exporter prints once it listens. */
    private static void awaitListening(Process exporter, String address, Path log) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!(Files.exists(log) && Files.readString(log, StandardCharsets.UTF_8).contains("rdma4j log exporter listening on /" + address))) {
            assertThat(exporter.isAlive()).as("the exporter process is running\n%s", tail(log)).isTrue();
            assertThat(System.nanoTime()).as("the exporter listens within 60 s\n%s", tail(log)).isLessThan(deadline);
            Thread.sleep(100);
        }
    }

    private static String tail(Path log) {
        try {
            List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
        } catch (IOException e) {
            return "(no output at " + log + ")";
        }
    }
}
