package io.rdma4j.kafka;

import io.rdma4j.kafka.exporter.BrokerExporterReporter;
import io.rdma4j.testsupport.kafka.KafkaBrokerProcess;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.stream.IntStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A four-broker KRaft cluster of real broker processes, each with the exporter plugin inside it on one port
 * convention ({@code rdma.exporter.port}; broker N on {@code 127.0.0.N}), and a topic whose eight partitions have two
 * replicas each and their leaders spread over all four brokers. An RDMA consumer configured with the bootstrap servers
 * and the port only reads every partition from its leader's exporter, and keeps doing so across a broker killed with
 * SIGKILL and started again, a preferred leader election and a reassignment to brokers that held no replica, with
 * exactly the records a {@code KafkaConsumer} reads; and reads on by RDMA after retention deleted, on every replica,
 * the segments it had read.
 */
class MultiBrokerClusterIT {

    private static final int BROKERS = 4;
    private static final int PARTITIONS = 8;
    private static final int PER_PHASE = 2000;
    private static final int KILLED = 3;

    @Test
    void everyPartitionIsReadFromItsLeadersExporterThroughFailoverAndElection(@TempDir Path dir) throws Exception {
        long started = System.nanoTime();
        int port = KafkaBrokerProcess.freePort();
        String topic = "spread";
        List<KafkaBrokerProcess> cluster = KafkaBrokerProcess.startCluster(dir, "cluster", BROKERS, node -> Map.of(
                "metric.reporters", BrokerExporterReporter.class.getName(),
                "rdma.exporter.listen.address", KafkaBrokerProcess.host(node) + ":" + port,
                "rdma.exporter.watermark.interval.ms", "20",
                "rdma.provider", "tcp",
                // A killed broker's partitions move to their followers after this, instead of the default 9 s.
                "broker.session.timeout.ms", "4000",
                "broker.heartbeat.interval.ms", "500",
                "log.retention.check.interval.ms", "1000",
                "log.initial.task.delay.ms", "0", // retention runs at once on a restarted broker too
                // KIP-392: consumers with client.rack fetch from an in-sync replica in their rack.
                "broker.rack", "rack-" + node,
                "replica.selector.class", "org.apache.kafka.common.replica.RackAwareReplicaSelector"),
                BrokerExporterPluginIT.brokerClassPathWithPluginJar());
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap(cluster)))) {
            Map<Integer, List<Integer>> assignment = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                int leader = p % BROKERS + 1;
                assignment.put(p, List.of(leader, (leader + p / BROKERS) % BROKERS + 1)); // Two replicas, leaders on every broker.
            }
            // Segments roll every few seconds while records come, so reads cross rolls on leaders and followers.
            admin.createTopics(List.of(new NewTopic(topic, assignment).configs(Map.of("min.insync.replicas", "1",
                    "segment.ms", "3000")))).all().get();
            List<TopicPartition> tps = IntStream.range(0, PARTITIONS).mapToObj(p -> new TopicPartition(topic, p)).toList();
            awaitLeaders(admin, topic, assignment);

            Map<String, Object> plainProps = new HashMap<>(Map.of("bootstrap.servers", bootstrap(cluster),
                    "key.deserializer", StringDeserializer.class, "value.deserializer", StringDeserializer.class,
                    "enable.auto.commit", "false", "max.poll.records", "100"));
            Map<String, Object> rdmaProps = new HashMap<>(plainProps);
            rdmaProps.put("rdma.fetch.enabled", "true");
            rdmaProps.put("rdma.exporter.port", Integer.toString(port)); // No address: each partition's leader's exporter.
            rdmaProps.put("rdma.provider", "tcp");
            rdmaProps.put("rdma.fetch.fallback.backoff.ms", "200");
            // A new consumer's partitions wait for its exporter connections: every record of the steady state is RDMA's.
            rdmaProps.putAll(KafkaFixtures.waitingForRdma(Map.of()));
            List<KafkaFixtures.Seen> got = new ArrayList<>();
            log(started, "cluster up, topic created");
            produce(cluster, topic, 0, PER_PHASE);
            try (Consumer<String, String> c = RdmaConsumerFactory.create(rdmaProps, null, null)) {
                RdmaKafkaConsumer<String, String> rdma = (RdmaKafkaConsumer<String, String>) c;
                c.assign(tps);
                c.seekToBeginning(tps);

                // 1. Steady state: every record of every partition by RDMA, each from its leader's exporter.
                pollUntil(c, got, PER_PHASE, cluster);
                Map<Integer, Long> perPartition = perPartition(got);
                assertThat(rdmaPerPartition(c, tps)).as("records by RDMA per partition, before any fault").isEqualTo(perPartition)
                        .hasSize(PARTITIONS);
                assertReadFromLeaders(admin, rdma, topic, tps, port);
                assertRackConsumerReadsFromItsRack(admin, rdmaProps, topic, tps, port, got);
                log(started, "read by RDMA from the leaders, and from rack-2's replicas with client.rack");

                // 2. A leader dies mid-read: its partitions move to their followers; what is produced meanwhile is read,
                // the first half perhaps through Kafka while the consumer learns the new leaders, the second by RDMA
                // from the new leaders' exporters.
                KafkaBrokerProcess killed = cluster.get(KILLED - 1);
                // Both replicas in sync first: a follower fenced meanwhile (a heartbeat late on a loaded machine, with
                // the 4 s session here) leaves the ISR, and a partition whose only in-sync replica is killed has no
                // leader to fail over to until the broker is back (a produce then timed out after 120 s).
                awaitInSync(admin, topic, assignment);
                killed.kill();
                log(started, "killed broker " + KILLED);
                produce(cluster, topic, PER_PHASE, PER_PHASE / 2);
                pollUntil(c, got, PER_PHASE + PER_PHASE / 2, cluster);
                awaitRdmaFromLeaders(admin, c, rdma, got, topic, tps, port, cluster);
                Map<Integer, Long> rdmaMidFailover = rdmaPerPartition(c, tps);
                produce(cluster, topic, PER_PHASE + PER_PHASE / 2, PER_PHASE / 2);
                pollUntil(c, got, 2 * PER_PHASE, cluster);
                Map<Integer, Long> rdmaAfterFailover = rdmaPerPartition(c, tps);
                assertGrew(rdmaMidFailover, rdmaAfterFailover, tps, "after the failover, fallbacks " + FetchFigures.fallbacks(c), cluster);
                assertReadFromLeaders(admin, rdma, topic, tps, port);
                log(started, "read across the failover");

                // 3. It comes back, catches up, and a preferred leader election gives it its partitions again.
                killed.startAgain();
                awaitInSync(admin, topic, assignment);
                log(started, "broker " + KILLED + " back in sync");
                admin.electLeaders(ElectionType.PREFERRED, Set.copyOf(tps)).partitions().get();
                awaitLeaders(admin, topic, assignment);
                // The consumer's metadata has no address for broker 3 yet (it was offline when last refreshed): a
                // partition moves to it after one fallback period, through which Kafka's fetch refreshes the metadata.
                awaitRdmaFromLeaders(admin, c, rdma, got, topic, tps, port, cluster);
                produce(cluster, topic, 2 * PER_PHASE, PER_PHASE);
                pollUntil(c, got, 3 * PER_PHASE, cluster);
                Map<Integer, Long> rdmaAfterElection = rdmaPerPartition(c, tps);
                assertGrew(rdmaAfterFailover, rdmaAfterElection, tps, "after the restart and the election, fallbacks " + FetchFigures.fallbacks(c),
                        cluster);
                assertReadFromLeaders(admin, rdma, topic, tps, port);
                log(started, "read across the restart and the election");

                // 4. A reassignment moves partition 0 to two brokers that held no replica of it.
                TopicPartition moved = tps.getFirst();
                admin.alterPartitionReassignments(Map.of(moved, java.util.Optional.of(
                        new org.apache.kafka.clients.admin.NewPartitionReassignment(List.of(4, 3))))).all().get();
                awaitPartitions(admin, topic, info -> info.partition() != 0 || (info.replicas().stream().map(n -> n.id())
                        .collect(java.util.stream.Collectors.toSet()).equals(Set.of(3, 4)) && info.isr().size() == 2
                        && info.leader() != null), "partition 0 on brokers 3 and 4");
                awaitRdmaFromLeaders(admin, c, rdma, got, topic, tps, port, cluster);
                produce(cluster, topic, 3 * PER_PHASE, PER_PHASE);
                pollUntil(c, got, 4 * PER_PHASE, cluster);
                c.poll(Duration.ofMillis(500)).forEach(r -> got.add(KafkaFixtures.Seen.of(r)));
                Map<Integer, Long> rdmaAtEnd = rdmaPerPartition(c, tps);
                assertGrew(rdmaAfterElection, rdmaAtEnd, tps, "after the reassignment, fallbacks " + FetchFigures.fallbacks(c), cluster);
                assertReadFromLeaders(admin, rdma, topic, tps, port);
                log(started, "read across the reassignment of " + moved + " to brokers 4 and 3");
                System.out.printf("[multi-broker] records by RDMA / total per partition: %s / %s; before the kill, all by RDMA: %s%n",
                        rdmaAtEnd, perPartition(got), perPartition);
                assertThat(sorted(got)).as("what the RDMA consumer read through the failover, the election and the reassignment,"
                        + " against KafkaConsumer").hasSize(4 * PER_PHASE).isEqualTo(readPlain(plainProps, tps, null, 4 * PER_PHASE, cluster));

                // 5. Retention deletes the segments already read, on every replica, while the consumer reads on.
                Map<TopicPartition, Long> before = offsets(admin, tps, org.apache.kafka.clients.admin.OffsetSpec.latest());
                retention(admin, topic, org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET);
                awaitDeleted(admin, tps);
                retention(admin, topic, org.apache.kafka.clients.admin.AlterConfigOp.OpType.DELETE); // keeps what comes next
                produce(cluster, topic, 4 * PER_PHASE, PER_PHASE);
                pollUntil(c, got, 5 * PER_PHASE, cluster);
                c.poll(Duration.ofMillis(500)).forEach(r -> got.add(KafkaFixtures.Seen.of(r)));
                assertGrew(rdmaAtEnd, rdmaPerPartition(c, tps), tps, "after retention deleted what was read, fallbacks " + FetchFigures.fallbacks(c),
                        cluster);
                assertThat(sorted(got.subList(4 * PER_PHASE, got.size()))).as("what the RDMA consumer read after the deletion")
                        .hasSize(PER_PHASE).isEqualTo(readPlain(plainProps, tps, before, PER_PHASE, cluster));
                log(started, "read on after retention deleted the segments read");
            }
        } finally {
            KafkaBrokerProcess.closeCluster(cluster);
            log(started, "cluster stopped");
        }
    }

    private static void log(long started, String what) {
        System.out.printf("[multi-broker] %5.1f s: %s%n", (System.nanoTime() - started) / 1e9, what);
    }

    private static void assertGrew(Map<Integer, Long> before, Map<Integer, Long> after, List<TopicPartition> tps, String when,
                                   List<KafkaBrokerProcess> cluster) {
        for (TopicPartition tp : tps) {
            assertThat(after.getOrDefault(tp.partition(), 0L) - before.getOrDefault(tp.partition(), 0L))
                    .as("records of %s by RDMA %s (before %s, after %s)\n%s", tp, when, before, after, tails(cluster)).isPositive();
        }
    }

    private static List<KafkaFixtures.Seen> sorted(List<KafkaFixtures.Seen> seen) {
        List<KafkaFixtures.Seen> out = new ArrayList<>(seen);
        out.sort(Comparator.comparing(KafkaFixtures.Seen::partition)); // stable: keeps per-partition order
        return out;
    }

    /** {@code count} records read by a KafkaConsumer from {@code from} (null: the beginning), sorted by partition. */
    private static List<KafkaFixtures.Seen> readPlain(Map<String, Object> props, List<TopicPartition> tps,
                                                              Map<TopicPartition, Long> from, int count,
                                                              List<KafkaBrokerProcess> cluster) {
        List<KafkaFixtures.Seen> plain = new ArrayList<>();
        try (Consumer<String, String> c = new KafkaConsumer<>(props)) {
            c.assign(tps);
            if (from == null) {
                c.seekToBeginning(tps);
            } else {
                from.forEach(c::seek);
            }
            pollUntil(c, plain, count, cluster);
        }
        return sorted(plain);
    }

    private static Map<TopicPartition, Long> offsets(Admin admin, List<TopicPartition> tps,
                                                     org.apache.kafka.clients.admin.OffsetSpec spec) throws Exception {
        Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> ask = new HashMap<>();
        tps.forEach(tp -> ask.put(tp, spec));
        Map<TopicPartition, Long> out = new HashMap<>();
        admin.listOffsets(ask).all().get().forEach((tp, info) -> out.put(tp, info.offset()));
        return out;
    }

    /** Sets the topic's retention.ms to 1 s, or deletes that override. */
    private static void retention(Admin admin, String topic, org.apache.kafka.clients.admin.AlterConfigOp.OpType op) throws Exception {
        admin.incrementalAlterConfigs(Map.of(new org.apache.kafka.common.config.ConfigResource(
                org.apache.kafka.common.config.ConfigResource.Type.TOPIC, topic), List.of(new org.apache.kafka.clients.admin.AlterConfigOp(
                new org.apache.kafka.clients.admin.ConfigEntry("retention.ms", "1000"), op)))).all().get();
    }

    /** Until retention has moved every partition's log start past offset 0. */
    private static void awaitDeleted(Admin admin, List<TopicPartition> tps) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            Map<TopicPartition, Long> start = offsets(admin, tps, org.apache.kafka.clients.admin.OffsetSpec.earliest());
            if (start.values().stream().allMatch(o -> o > 0)) {
                return;
            }
            assertThat(System.nanoTime()).as("retention deleted segments of every partition within 60 s: %s", start).isLessThan(deadline);
            Thread.sleep(200);
        }
    }

    private static String bootstrap(List<KafkaBrokerProcess> cluster) {
        return String.join(",", cluster.stream().map(KafkaBrokerProcess::bootstrapServers).toList());
    }

    /** Each partition's last RDMA read came from the exporter of its current leader. */
    private static void assertReadFromLeaders(Admin admin, RdmaKafkaConsumer<?, ?> rdma, String topic, List<TopicPartition> tps,
                                              int port) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        for (TopicPartitionInfo info : d.partitions()) {
            TopicPartition tp = new TopicPartition(topic, info.partition());
            assertThat(rdma.rdmaExporterOf(tp)).as("exporter %s was read from", tp)
                    .isEqualTo(new InetSocketAddress(KafkaBrokerProcess.host(info.leader().id()), port));
        }
        assertThat(tps).hasSize(d.partitions().size());
    }

    /**
     * A consumer in rack-2 reads each partition of which broker 2 holds an in-sync replica from broker 2's exporter, as
     * Kafka's RackAwareReplicaSelector would have it fetch, and the others from their leaders; all by RDMA.
     */
    private static void assertRackConsumerReadsFromItsRack(Admin admin, Map<String, Object> rdmaProps, String topic,
                                                           List<TopicPartition> tps, int port,
                                                           List<KafkaFixtures.Seen> expected) throws Exception {
        Map<String, Object> props = new HashMap<>(rdmaProps);
        props.put("client.rack", "rack-2");
        List<KafkaFixtures.Seen> read = new ArrayList<>();
        try (Consumer<String, String> c = RdmaConsumerFactory.create(props, null, null)) {
            RdmaKafkaConsumer<String, String> rdma = (RdmaKafkaConsumer<String, String>) c;
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (read.size() < expected.size() && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(r -> read.add(KafkaFixtures.Seen.of(r)));
            }
            assertThat(KafkaFixtures.rdmaRecords(rdma)).as("records of the rack-2 consumer by RDMA").isEqualTo(expected.size());
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            int followerReads = 0;
            for (TopicPartitionInfo info : d.partitions()) {
                boolean inRack = info.isr().stream().anyMatch(n -> n.id() == 2);
                followerReads += inRack && info.leader().id() != 2 ? 1 : 0;
                assertThat(rdma.rdmaExporterOf(new TopicPartition(topic, info.partition())))
                        .as("exporter read for partition %d with client.rack=rack-2 (ISR %s)", info.partition(), info.isr())
                        .isEqualTo(new InetSocketAddress(KafkaBrokerProcess.host(inRack ? 2 : info.leader().id()), port));
            }
            assertThat(followerReads).as("partitions read from a follower in rack-2").isPositive();
        }
        List<KafkaFixtures.Seen> sorted = new ArrayList<>(read);
        sorted.sort(Comparator.comparing(KafkaFixtures.Seen::partition));
        List<KafkaFixtures.Seen> want = new ArrayList<>(expected);
        want.sort(Comparator.comparing(KafkaFixtures.Seen::partition));
        assertThat(sorted).as("what the rack-2 consumer read").isEqualTo(want);
    }

    /** Polls until every partition is read by RDMA from its current leader's exporter again. */
    private static void awaitRdmaFromLeaders(Admin admin, Consumer<String, String> c, RdmaKafkaConsumer<?, ?> rdma,
                                             List<KafkaFixtures.Seen> got, String topic, List<TopicPartition> tps,
                                             int port, List<KafkaBrokerProcess> cluster) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (true) {
            c.poll(Duration.ofMillis(100)).forEach(r -> got.add(KafkaFixtures.Seen.of(r)));
            Map<TopicPartition, InetSocketAddress> want = new HashMap<>();
            for (TopicPartitionInfo info : admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()) {
                want.put(new TopicPartition(topic, info.partition()), info.leader() == null ? null
                        : new InetSocketAddress(KafkaBrokerProcess.host(info.leader().id()), port));
            }
            Map<TopicPartition, InetSocketAddress> reading = new HashMap<>();
            tps.forEach(tp -> reading.put(tp, rdma.rdmaExporterOf(tp)));
            if (reading.equals(want)) {
                return;
            }
            assertThat(System.nanoTime()).as("RDMA from the new leaders within 30 s: reading %s, leaders %s, fallbacks %s\n%s",
                    reading, want, FetchFigures.fallbacks(c), tails(cluster)).isLessThan(deadline);
        }
    }

    private static void awaitLeaders(Admin admin, String topic, Map<Integer, List<Integer>> assignment) throws Exception {
        awaitPartitions(admin, topic, info -> info.leader() != null
                && info.leader().id() == assignment.get(info.partition()).getFirst(), "preferred leaders");
    }

    private static void awaitInSync(Admin admin, String topic, Map<Integer, List<Integer>> assignment) throws Exception {
        awaitPartitions(admin, topic, info -> info.isr().size() == assignment.get(info.partition()).size(), "full ISRs");
    }

    private static void awaitPartitions(Admin admin, String topic, java.util.function.Predicate<TopicPartitionInfo> done,
                                        String what) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            List<TopicPartitionInfo> infos = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions();
            if (infos.stream().allMatch(done)) {
                return;
            }
            assertThat(System.nanoTime()).as("%s of %s within 60 s: %s", what, topic, infos).isLessThan(deadline);
            Thread.sleep(200);
        }
    }

    /** Keys land on partition {@code i % 8}; acks=all, so a produce across the failover loses nothing. */
    private static void produce(List<KafkaBrokerProcess> cluster, String topic, int from, int count) throws Exception {
        Map<String, Object> producer = Map.of("bootstrap.servers", bootstrap(cluster), "acks", "all",
                "key.serializer", StringSerializer.class, "value.serializer", StringSerializer.class);
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producer)) {
            for (int i = from; i < from + count; i++) {
                acks.add(p.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, KafkaFixtures.value(i, 300))));
            }
        }
        for (Future<RecordMetadata> ack : acks) {
            ack.get();
        }
    }

    private static void pollUntil(Consumer<String, String> c, List<KafkaFixtures.Seen> got, int count,
                                  List<KafkaBrokerProcess> cluster) {
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        while (got.size() < count && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.add(KafkaFixtures.Seen.of(r));
            }
        }
        assertThat(got).as("records read within 90 s\n%s", tails(cluster)).hasSizeGreaterThanOrEqualTo(count);
    }

    private static Map<Integer, Long> perPartition(List<KafkaFixtures.Seen> got) {
        Map<Integer, Long> out = new TreeMap<>();
        got.forEach(s -> out.merge(s.partition(), 1L, Long::sum));
        return out;
    }

    /** The consumer's {@code records-rdma-total} per partition. */
    private static Map<Integer, Long> rdmaPerPartition(Consumer<?, ?> c, List<TopicPartition> tps) {
        Map<Integer, Long> out = new TreeMap<>();
        for (var e : c.metrics().entrySet()) {
            MetricName n = e.getKey();
            if (n.name().equals("records-rdma-total") && n.tags().containsKey("partition")) {
                long v = ((Number) e.getValue().metricValue()).longValue();
                if (v > 0) {
                    out.put(Integer.parseInt(n.tags().get("partition")), v);
                }
            }
        }
        return out;
    }

    private static String tails(List<KafkaBrokerProcess> cluster) {
        return String.join("\n", cluster.stream().map(KafkaBrokerProcess::logTail).toList());
    }
}
