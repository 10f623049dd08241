package io.rdma4j.kafka;

import io.rdma4j.core.RdmaConnection;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestTypes;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.OperationType;
import io.rdma4j.kafka.exporter.ExporterConfig;
import io.rdma4j.kafka.exporter.LogExporter;
import io.rdma4j.kafka.protocol.AbortedTransactions;
import io.rdma4j.kafka.protocol.ExporterAuthentication;
import io.rdma4j.kafka.protocol.SegmentDirectory;
import io.rdma4j.testsupport.kafka.KafkaFixtures;
import io.rdma4j.testsupport.kafka.KafkaTestCluster;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ExpireDelegationTokenOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.test.JaasUtils;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Log exporters left at their default ({@code rdma.exporter.acls=auto}) on a SASL cluster with ACLs
 * ({@link KafkaTestCluster#secured}): they find the authorizer and serve a topic only to a connection that proved a
 * delegation token whose owner has READ on it, as the cluster's own authorizer decides. Three brokers on one host
 * (localhost, a port each), each with its exporter on the broker's port plus {@link #offset}; every partition on every
 * broker, leaders on all three. {@code plain-user1} may READ {@value #GRANTED}, only DESCRIBE {@value #DENIED}.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ExporterAclTest {

    static final String GRANTED = "acl-granted";
    static final String DENIED = "acl-denied";
    private static final String GROUP = "acl-group";
    private static final int RECORDS = 1000;
    private static final String USER1 = "User:" + JaasUtils.KAFKA_PLAIN_USER1;
    private static final TopicPartition OFFSETS = new TopicPartition("__consumer_offsets", 0);

    private static final int BROKERS = 3;
    private static final List<TopicPartition> GRANTED_PARTITIONS = List.of(new TopicPartition(GRANTED, 0),
            new TopicPartition(GRANTED, 1), new TopicPartition(GRANTED, 2));

    private static KafkaTestCluster cluster;
    private static Admin admin;
    /** Broker 0's exporter: its log holds every partition, so it serves them all to a consumer given its address. */
    private static LogExporter exporter;
    /** Each broker's exporter, by broker id, on the broker's port plus {@link #offset}. */
    private static final Map<Integer, LogExporter> exporters = new TreeMap<>();
    private static int offset;

    @BeforeAll
    static void start() throws Exception {
        cluster = KafkaTestCluster.secured(BROKERS, Map.of());
        admin = cluster.superAdmin();
        // Replicas on every broker, leaders on each: broker N leads partition N.
        admin.createTopics(List.of(new NewTopic(GRANTED, Map.of(0, List.of(0, 1, 2), 1, List.of(1, 2, 0), 2, List.of(2, 0, 1))),
                new NewTopic(DENIED, 1, (short) BROKERS))).all().get();
        admin.createAcls(List.of(acl(ResourceType.TOPIC, GRANTED, AclOperation.READ), acl(ResourceType.TOPIC, DENIED, AclOperation.DESCRIBE),
                acl(ResourceType.GROUP, GROUP, AclOperation.READ))).all().get();
        Map<String, Object> p = cluster.clientProps(JaasUtils.KAFKA_PLAIN_ADMIN, JaasUtils.KAFKA_PLAIN_ADMIN_PASSWORD);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(GRANTED, i % BROKERS, "k" + i, "granted-" + i));
                producer.send(new ProducerRecord<>(DENIED, 0, "k" + i, "denied-" + i));
            }
        }
        Map<String, Object> c = new HashMap<>(p);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, "acl-admin-group");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
            consumer.commitSync(Map.of(new TopicPartition(GRANTED, 0), new OffsetAndMetadata(1))); // __consumer_offsets exists
        }
        // Tokens are created and looked up through whichever broker a client picks; brokers learn them a moment apart.
        Map<Integer, Integer> ports = new TreeMap<>();
        admin.describeCluster().nodes().get().forEach(n -> ports.put(n.id(), n.port()));
        offset = freeOffset(ports.values());
        for (var broker : ports.entrySet()) {
            Map<String, Object> e = new HashMap<>(cluster.exporterProps(broker.getKey(), null));
            e.remove(ExporterConfig.LISTEN);
            e.put(ExporterConfig.BOOTSTRAP, "localhost:" + broker.getValue()); // its own broker
            e.put(ExporterConfig.PORT_OFFSET, Integer.toString(offset));
            e.put(ExporterConfig.INTERVAL, "50");
            e.put(ExporterConfig.ACL_CACHE, "300");
            p.forEach((k, v) -> e.put(ExporterConfig.ADMIN_PREFIX + k, v));
            exporters.put(broker.getKey(), LogExporter.start(ExporterConfig.fromProperties(e)));
        }
        exporter = exporters.get(0);
        for (LogExporter x : exporters.values()) {
            x.refresh();
        }
    }

    /** An offset that puts every broker's exporter on a free port. */
    private static int freeOffset(java.util.Collection<Integer> brokerPorts) throws java.io.IOException {
        for (int candidate = 211; candidate < 20_000; candidate += 97) {
            List<java.net.ServerSocket> held = new ArrayList<>();
            try {
                for (int port : brokerPorts) {
                    held.add(new java.net.ServerSocket(port + candidate, 1, java.net.InetAddress.getLoopbackAddress()));
                }
                return candidate;
            } catch (java.io.IOException taken) {
                // try the next offset
            } finally {
                for (java.net.ServerSocket s : held) {
                    s.close();
                }
            }
        }
        throw new IllegalStateException("no port offset leaves every broker's exporter port free");
    }

    @AfterAll
    static void stop() {
        exporters.values().forEach(LogExporter::close);
        if (admin != null) admin.close();
        if (cluster != null) cluster.close();
    }

    private static AclBinding acl(ResourceType type, String name, AclOperation op) {
        return new AclBinding(new ResourcePattern(type, name, PatternType.LITERAL),
                new AccessControlEntry(USER1, "*", op, AclPermissionType.ALLOW));
    }

    private static Map<String, Object> user1(boolean rdma, String authentication) {
        Map<String, Object> p = cluster.clientProps(JaasUtils.KAFKA_PLAIN_USER1, JaasUtils.KAFKA_PLAIN_USER1_PASSWORD);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (rdma) {
            p.put("rdma.fetch.enabled", "true");
            p.put("rdma.exporter.address", "127.0.0.1:" + exporter.address().getPort());
            p.put("rdma.provider", "tcp");
            p.put("rdma.fetch.fallback.backoff.ms", "200");
            p.put(RdmaConsumerConfig.AUTHENTICATION, authentication);
            // Each test's consumers create a token of their own; sharing one is tested on its own.
            p.put(RdmaConsumerConfig.TOKEN_LINGER, "0");
        }
        return p;
    }

    @Test
    void aConsumerWhosePrincipalMayReadGetsEveryRecordByRdma() {
        Map<String, Object> props = KafkaFixtures.waitingForRdma(user1(true, "delegation-token")); // RDMA's once the token is proven
        props.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP);
        long authenticated = exporter.authenticatedConnections();
        try (RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
             KafkaConsumer<String, String> plain = new KafkaConsumer<>(user1(false, null), new StringDeserializer(), new StringDeserializer())) {
            rdma.subscribe(List.of(GRANTED));
            plain.assign(GRANTED_PARTITIONS);
            Map<TopicPartition, List<String>> viaRdma = drain(rdma, RECORDS);
            assertThat(viaRdma).isEqualTo(drain(plain, RECORDS));
            KafkaFixtures.assertReadByRdma(rdma, RECORDS, "a consumer whose principal may read");
            assertThat(exporter.authenticatedConnections()).as("connections that proved a token").isGreaterThan(authenticated);
        }
    }

    @Test
    void aConsumerWithoutReadGetsKafkasAuthorizationErrorAndNoByteByRdma() {
        long served = exporter.transport().metrics().servedBytes(OperationType.READ);
        long refusals = exporter.aclRefusals();
        try (RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(user1(true, "delegation-token"),
                new StringDeserializer(), new StringDeserializer())) {
            rdma.assign(List.of(new TopicPartition(DENIED, 0)));
            // Kafka's fetch refuses it while the token is created and proven, then the exporter refuses it too.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            int refusedByKafka = 0;
            while (refusedByKafka == 0 || !FetchFigures.fallbacks(rdma).containsKey("not-authorized")) {
                assertThat(System.nanoTime()).as("refused by Kafka (%d times) and the exporter (fallbacks %s) within 30 s",
                        refusedByKafka, FetchFigures.fallbacks(rdma)).isLessThan(deadline);
                try {
                    assertThat(rdma.poll(Duration.ofMillis(200)).count()).isZero();
                } catch (TopicAuthorizationException e) {
                    assertThat(e).hasMessageContaining(DENIED);
                    refusedByKafka++;
                }
            }
            assertThat(KafkaFixtures.rdmaRecords(rdma)).isZero();
            assertThat(rdma.transportMetrics().snapshot(OperationType.READ).count()).as("RDMA READs of the consumer").isZero();
            assertThat(FetchFigures.fallbacks(rdma)).containsKey("not-authorized");
        }
        assertThat(exporter.transport().metrics().servedBytes(OperationType.READ)).as("bytes the exporter served").isEqualTo(served);
        assertThat(exporter.aclRefusals()).isGreaterThan(refusals);
    }

    @Test
    void aConsumerThatProvesNoTokenIsServedNothingAndReadsThroughKafka() {
        try (RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(user1(true, "none"), new StringDeserializer(),
                new StringDeserializer())) {
            rdma.assign(GRANTED_PARTITIONS);
            assertThat(drain(rdma, RECORDS).values().stream().mapToInt(List::size).sum()).isEqualTo(RECORDS);
            assertThat(KafkaFixtures.rdmaRecords(rdma)).isZero();
            FetchFigures.pollUntilFallback(rdma, "not-authorized");
        }
    }

    /** A consumer of {@code plain-user1} that proves a token and reads each partition from its leader's exporter. */
    private static Map<String, Object> perBrokerConsumer() {
        Map<String, Object> props = user1(true, "delegation-token");
        props.remove(RdmaConsumerConfig.EXPORTER_ADDRESS);
        props.put(RdmaConsumerConfig.EXPORTER_PORT_OFFSET, Integer.toString(offset)); // each broker's port plus the offset
        return props;
    }

    @Test
    void threeBrokersOnOneHostServeEveryPartitionByRdmaFromItsLeadersExporter() throws Exception {
        try (RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(KafkaFixtures.waitingForRdma(perBrokerConsumer()),
                new StringDeserializer(), new StringDeserializer());
             KafkaConsumer<String, String> plain = new KafkaConsumer<>(user1(false, null), new StringDeserializer(), new StringDeserializer())) {
            rdma.assign(GRANTED_PARTITIONS);
            plain.assign(GRANTED_PARTITIONS);
            assertThat(drain(rdma, RECORDS)).isEqualTo(drain(plain, RECORDS));
            // The consumer's token is new to every exporter: each takes it as soon as the cluster lists it.
            KafkaFixtures.assertReadByRdma(rdma, RECORDS, "three brokers' exporters");
            for (TopicPartitionInfo info : admin.describeTopics(List.of(GRANTED)).allTopicNames().get().get(GRANTED).partitions()) {
                assertThat(rdma.rdmaExporterOf(new TopicPartition(GRANTED, info.partition())).getPort())
                        .as("exporter port read for partition %d, led by broker %d", info.partition(), info.leader().id())
                        .isEqualTo(exporters.get(info.leader().id()).address().getPort());
            }
        }
    }

    @Test
    void aNewConsumerReadsThroughKafkaUntilItsTokenIsProvenThenByRdmaFromWhereKafkaLeftOff() throws Exception {
        // A topic of its own, which grows while the consumer reads: the exporter decides on the topic for the new token
        // after the proof, and Kafka's fetch may have returned everything there was by then.
        String topic = "acl-held";
        List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1), new TopicPartition(topic, 2));
        admin.createTopics(List.of(new NewTopic(topic, 3, (short) BROKERS))).all().get();
        admin.createAcls(List.of(acl(ResourceType.TOPIC, topic, AclOperation.READ))).all().get();
        Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> latest = new HashMap<>();
        tps.forEach(tp -> latest.put(tp, org.apache.kafka.clients.admin.OffsetSpec.latest()));
        KafkaFixtures.awaitLeaders(admin, latest);
        int produced = produceAndAwaitExported(topic, 0, 300);
        try (HeldExporter held = new HeldExporter(exporter.address())) {
            Map<String, Object> props = user1(true, "delegation-token");
            props.put(RdmaConsumerConfig.EXPORTER_ADDRESS, held.address());
            props.put("rdma.connect-timeout", "90s"); // far beyond the deadline below: a poll may not wait for it
            props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
            try (RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
                rdma.assign(tps);
                FetchFigures.Paths paths = new FetchFigures.Paths(rdma);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (paths.records() == 0) {
                    assertThat(System.nanoTime()).as("records through Kafka within 30 s while the exporter holds the connection")
                            .isLessThan(deadline);
                    paths.poll(Duration.ofMillis(100));
                }
                assertThat(held.accepted()).as("connections the consumer opened meanwhile").isPositive();
                assertThat(KafkaFixtures.rdmaRecords(rdma)).as("records by RDMA before the exporter took the connection").isZero();

                held.release(); // the token is proven on the connection, then RDMA reads what comes after Kafka's
                deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (paths.records() < produced || !paths.order().values().stream().allMatch(o -> o.endsWith("R"))) {
                    assertThat(System.nanoTime()).as("every partition read by RDMA within 60 s: %d of %d records, polls %s",
                            paths.records(), produced, paths.order()).isLessThan(deadline);
                    if (paths.poll(Duration.ofMillis(100)) == 0 && paths.records() >= produced) {
                        produced = produceAndAwaitExported(topic, produced, 30);
                    }
                }
                assertThat(paths.poll(Duration.ofMillis(300))).as("records beyond the end").isZero();
                paths.assertKafkaThenRdma(rdma.endOffsets(tps));
                assertThat(paths.order().values()).as("polls that returned records through Kafka").anyMatch(o -> o.startsWith("K"));
                System.out.printf("secured, exporter slow to accept: %d records through Kafka, then %d by RDMA; polls per partition %s%n",
                        produced - KafkaFixtures.rdmaRecords(rdma), KafkaFixtures.rdmaRecords(rdma), paths.order());
                assertThat(FetchFigures.fallbacks(rdma)).containsOnlyKeys("exporter-connecting");
            }
        }
    }

    /** Produces {@code count} records to {@code topic} (numbered from {@code from}), awaits their export; returns the total. */
    private static int produceAndAwaitExported(String topic, int from, int count) throws Exception {
        Map<String, Object> p = cluster.clientProps(JaasUtils.KAFKA_PLAIN_ADMIN, JaasUtils.KAFKA_PLAIN_ADMIN_PASSWORD);
        Map<TopicPartition, Long> ends = new HashMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            List<Future<org.apache.kafka.clients.producer.RecordMetadata>> acks = new ArrayList<>();
            for (int i = from; i < from + count; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, i % 3, "k" + i, "held-" + i)));
            }
            for (var ack : acks) {
                var m = ack.get();
                ends.merge(new TopicPartition(m.topic(), m.partition()), m.offset() + 1, Math::max);
            }
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        for (var end : ends.entrySet()) {
            while (exporter.exportedHighWatermark(end.getKey()) < end.getValue()) {
                assertThat(System.nanoTime()).as("%s exported up to %d within 30 s", end.getKey(), end.getValue()).isLessThan(deadline);
                Thread.sleep(20);
            }
        }
        return from + count;
    }

    @Test
    void aConsumerClosedWhileItsTokenIsCreatedClosesAtOnceAndLeavesNoTokenBehind() throws Exception {
        try (Admin asUser1 = Admin.create(user1(false, null))) {
            java.util.Set<String> before = liveTokens(asUser1);
            long start = System.nanoTime();
            RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(perBrokerConsumer(), new StringDeserializer(),
                    new StringDeserializer());
            rdma.close(); // its token being created meanwhile, on its own thread
            assertThat(Duration.ofNanos(System.nanoTime() - start)).as("construction and close").isLessThan(Duration.ofSeconds(20));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
            java.util.Set<String> left;
            while (!before.containsAll(left = liveTokens(asUser1))) {
                assertThat(System.nanoTime()).as("the consumer's token expired within 15 s of its close: live %s, before %s", left, before)
                        .isLessThan(deadline);
                Thread.sleep(100);
            }
        }
    }

    @Test
    void consumersOfOnePrincipalShareOneTokenWhichOutlivesTheLastOneForTheLingerOnly() throws Exception {
        try (Admin asUser1 = Admin.create(user1(false, null))) {
            java.util.Set<String> before = liveTokens(asUser1);
            Map<String, Object> props = KafkaFixtures.waitingForRdma(perBrokerConsumer());
            props.put(RdmaConsumerConfig.TOKEN_LINGER, "5000");
            Map<String, Object> another = new HashMap<>(props);
            another.put(ConsumerConfig.CLIENT_ID_CONFIG, "another-reader"); // settings that do not change the principal
            another.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
            try (RdmaKafkaConsumer<String, String> one = new RdmaKafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
                 RdmaKafkaConsumer<String, String> two = new RdmaKafkaConsumer<>(another, new StringDeserializer(), new StringDeserializer())) {
                one.assign(GRANTED_PARTITIONS);
                two.assign(GRANTED_PARTITIONS);
                assertThat(drain(one, RECORDS)).isEqualTo(drain(two, RECORDS));
                KafkaFixtures.assertReadByRdma(one, RECORDS, "the first consumer");
                KafkaFixtures.assertReadByRdma(two, RECORDS, "the second consumer");
            }
            java.util.Set<String> created = new java.util.HashSet<>(liveTokens(asUser1));
            created.removeAll(before);
            assertThat(created).as("tokens the two consumers created").hasSize(1);

            // Both closed: a consumer that comes within the linger proves that token, and the cluster makes no other.
            try (RdmaKafkaConsumer<String, String> three = new RdmaKafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
                three.assign(GRANTED_PARTITIONS);
                assertThat(drain(three, RECORDS).values().stream().mapToInt(List::size).sum()).isEqualTo(RECORDS);
                KafkaFixtures.assertReadByRdma(three, RECORDS, "a consumer after both closed");
            }
            java.util.Set<String> after = new java.util.HashSet<>(liveTokens(asUser1));
            after.removeAll(before);
            assertThat(after).as("live tokens right after the last consumer closed: the shared one lingers").isEqualTo(created);

            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (liveTokens(asUser1).containsAll(created)) {
                assertThat(System.nanoTime()).as("the shared token expired within 20 s of the last close (linger 5 s)").isLessThan(deadline);
                Thread.sleep(200);
            }
        }
    }

    private static java.util.Set<String> liveTokens(Admin asUser1) throws Exception {
        java.util.Set<String> out = new java.util.HashSet<>();
        asUser1.describeDelegationToken().delegationTokens().get().stream()
                .filter(t -> t.tokenInfo().expiryTimestamp() > System.currentTimeMillis()).forEach(t -> out.add(t.tokenInfo().tokenId()));
        return out;
    }

    @Test
    void aNewTokenIsTakenByEveryBrokersExporterRightAfterItIsCreated() throws Exception {
        try (RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             Admin asUser1 = Admin.create(user1(false, null));
             ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor()) {
            DelegationToken token = asUser1.createDelegationToken().delegationToken().get();
            // Proven at once to all three, before any broker need have learnt it from the metadata log.
            List<Future<SegmentDirectory.Status>> answers = new ArrayList<>();
            for (LogExporter x : exporters.values()) {
                answers.add(threads.submit(() -> {
                    try (RdmaConnection c = peer.connect(x.address()).get(10, TimeUnit.SECONDS)) {
                        prove(c, token, challenge(c));
                        return directory(c, GRANTED).status();
                    }
                }));
            }
            for (Future<SegmentDirectory.Status> answer : answers) {
                assertThat(answer.get(30, TimeUnit.SECONDS)).isEqualTo(SegmentDirectory.Status.OK);
            }
        }
    }

    @Test
    void anExporterToldNotToCheckAclsWarnsAndAConsumerThatProvesATokenTakesNothingFromIt() throws Exception {
        Map<String, Object> e = new HashMap<>(cluster.exporterProps(0, "127.0.0.1:0"));
        e.put(ExporterConfig.ACLS, "false");
        cluster.clientProps(JaasUtils.KAFKA_PLAIN_ADMIN, JaasUtils.KAFKA_PLAIN_ADMIN_PASSWORD)
                .forEach((k, v) -> e.put(ExporterConfig.ADMIN_PREFIX + k, v));
        String log = RdmaFetchMetricsTest.capturingStandardError(() -> {
            try (LogExporter open = LogExporter.start(ExporterConfig.fromProperties(e))) {
                open.refresh();
                Map<String, Object> props = user1(true, "delegation-token");
                props.put(RdmaConsumerConfig.EXPORTER_ADDRESS, "127.0.0.1:" + open.address().getPort());
                try (RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(props, new StringDeserializer(),
                        new StringDeserializer())) {
                    rdma.assign(GRANTED_PARTITIONS);
                    assertThat(drain(rdma, RECORDS).values().stream().mapToInt(List::size).sum()).isEqualTo(RECORDS);
                    FetchFigures.pollUntilFallback(rdma, "acls-not-checked");
                    assertThat(KafkaFixtures.rdmaRecords(rdma)).isZero();
                    assertThat(FetchFigures.fallbacks(rdma).keySet()).isSubsetOf("acls-not-checked", "exporter-connecting");
                }
                assertThat(open.transport().metrics().servedBytes(OperationType.READ)).as("bytes the exporter served").isZero();
            }
        });
        assertThat(log.lines().filter(l -> l.contains("rdma.exporter.acls=false on a cluster with an authorizer")))
                .as("WARN lines about acls=false").hasSize(1).allMatch(l -> l.contains("WARN"));
    }

    @Test
    void anExporterLeftAtAutoRefusesToStartWhenItsAdminClientCannotCheckTheClustersAcls() {
        Map<String, Object> e = new HashMap<>(cluster.exporterProps(0, "127.0.0.1:0"));
        e.put(ExporterConfig.BOOTSTRAP, cluster.plaintextBootstrap()); // User:ANONYMOUS, no SASL for delegation tokens
        assertThatThrownBy(() -> LogExporter.start(ExporterConfig.fromProperties(e)).close())
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("the cluster has an authorizer")
                .hasMessageContaining("rdma.exporter.admin.security.protocol=SASL_SSL or SASL_PLAINTEXT")
                .hasMessageContaining("rdma.exporter.acls=false");
    }

    @Test
    @Order(Integer.MAX_VALUE) // Last: the restarted broker's partitions have other leaders afterwards.
    void aBrokerRestartAfterAConsumerWentAwayLogsNoErrorAndNoFailedTokenLogin() throws Exception {
        String log = RdmaFetchMetricsTest.capturingStandardError(() -> {
            // Its token clients on every exporter, then its token expired as it closes.
            readAll(perBrokerConsumer());
            var broker = cluster.kit().brokers().get(BROKERS - 1);
            broker.shutdown();
            broker.awaitShutdown();
            broker.startup();
            cluster.kit().waitForReadyBrokers();
            readAll(perBrokerConsumer());
        });
        // The exporters' WARN and ERROR lines and their Kafka clients' (client ids rdma4j-log-exporter...), by cause:
        // the line with its numbers (ports, node ids) and token ids left out.
        Map<String, Long> causes = new TreeMap<>();
        log.lines().filter(l -> (l.contains(" WARN ") || l.contains(" ERROR ")) && (l.contains("rdma4j-log-exporter")
                        || l.contains("io.rdma4j.kafka.exporter")))
                .forEach(l -> causes.merge(l.replaceAll("^\\[[^]]*] ", "").replaceAll("[0-9]+", "#")
                        .replaceAll("token [A-Za-z0-9_-]+", "token *"), 1L, Long::sum));
        System.out.println("[restart] the exporters' WARN and ERROR lines by cause: " + causes);
        assertThat(causes.keySet()).as("ERROR lines").noneMatch(l -> l.startsWith("ERROR"));
        // The token clients' failed logins were the storm: none may log in with a token that is gone.
        assertThat(causes.keySet()).as("lines of token clients").noneMatch(l -> l.contains("rdma#j-log-exporter-acl"));
        assertThat(causes).as("the exporters' own WARN lines per cause").allSatisfy((cause, count) -> {
            if (cause.contains("io.rdma#j.kafka.exporter")) {
                assertThat(count).as(cause).isEqualTo(1);
            }
        });
        // Not bounded here: Kafka's Admin client of an exporter logs "could not be established" at each reconnect to
        // the stopped broker (none to two lines per restart here), as every Kafka client does.
    }

    private static void readAll(Map<String, Object> props) {
        try (RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            rdma.assign(GRANTED_PARTITIONS);
            assertThat(drain(rdma, RECORDS).values().stream().mapToInt(List::size).sum()).isEqualTo(RECORDS);
        }
    }

    @Test
    void aRawPeerGetsNothingWithoutAProvenTokenWithReadAndLosesItWhenReadOrTheTokenGoes() throws Exception {
        try (RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             RdmaConnection c = peer.connect(exporter.address()).get(10, TimeUnit.SECONDS);
             Admin asUser1 = Admin.create(user1(false, null))) {
            assertThat(directory(c, GRANTED).status()).as("no token proven").isEqualTo(SegmentDirectory.Status.NOT_AUTHORIZED);
            assertThat(AbortedTransactions.Response.fromBytes(c.requestAndWait(RequestTypes.KAFKA_ABORTED_TRANSACTIONS,
                    ByteBuffer.wrap(new AbortedTransactions.Request(GRANTED, 0, 0, 10).toBytes())),
                    new AbortedTransactions.Request(GRANTED, 0, 0, 10)).status()).isEqualTo(AbortedTransactions.Status.NOT_AUTHORIZED);

            DelegationToken token = asUser1.createDelegationToken().delegationToken().get();
            String id = token.tokenInfo().tokenId();
            awaitKnown(id);
            long rejected = exporter.rejectedTokenProofs();
            assertRefused(c, new ExporterAuthentication.Proof(id, new byte[32]), "a proof without a challenge");
            byte[] oldNonce = challenge(c);
            assertRefused(c, new ExporterAuthentication.Proof(id, ExporterAuthentication.proof(new byte[64], oldNonce, id)),
                    "a proof keyed by a forged HMAC");
            byte[] nonce = challenge(c);
            assertRefused(c, new ExporterAuthentication.Proof(id, ExporterAuthentication.proof(token.hmac(), oldNonce, id)),
                    "a proof over a spent nonce");
            assertRefused(c, new ExporterAuthentication.Proof("no-such-token", ExporterAuthentication.proof(token.hmac(), challenge(c),
                    "no-such-token")), "a token id the cluster does not know");
            assertThat(exporter.rejectedTokenProofs()).isEqualTo(rejected + 4);
            assertThat(directory(c, GRANTED).status()).isEqualTo(SegmentDirectory.Status.NOT_AUTHORIZED);

            nonce = challenge(c);
            long lookups = exporter.delegationTokenLookups();
            prove(c, token, nonce);
            SegmentDirectory.Response granted = directory(c, GRANTED);
            assertThat(granted.status()).isEqualTo(SegmentDirectory.Status.OK);
            assertThat(exporter.delegationTokenLookups()).as("token lookups for the proof and the first decision after it: "
                    + "the token just listed is not looked up again").isLessThanOrEqualTo(lookups + 1);
            assertThat(granted.segments()).isNotEmpty();
            assertThat(directory(c, DENIED).status()).as("DESCRIBE but not READ").isEqualTo(SegmentDirectory.Status.NOT_AUTHORIZED);

            // READ revoked: refused once the decision kept (300 ms here) is over; READ given back: served again.
            AclBinding read = acl(ResourceType.TOPIC, GRANTED, AclOperation.READ);
            admin.deleteAcls(List.of(read.toFilter())).all().get();
            try {
                awaitStatus(c, SegmentDirectory.Status.NOT_AUTHORIZED, "after READ was revoked");
            } finally {
                admin.createAcls(List.of(read)).all().get();
            }
            awaitStatus(c, SegmentDirectory.Status.OK, "after READ was given back");

            // The token expired by its owner: the connection's proof no longer counts.
            asUser1.expireDelegationToken(token.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp().get();
            awaitStatus(c, SegmentDirectory.Status.NOT_AUTHORIZED, "after the token expired");
            assertRefused(c, new ExporterAuthentication.Proof(id, ExporterAuthentication.proof(token.hmac(), challenge(c), id)),
                    "the expired token proven again");
        }
    }

    @Test
    void aPrincipalsNewTokenFindsItsTopicsDecidedAndATokenExpiredMeanwhileStopsCountingAfterTheCachePeriod() throws Exception {
        Map<String, Object> props = new HashMap<>(cluster.exporterProps(0, "127.0.0.1:0"));
        props.put(ExporterConfig.ACL_CACHE, "5000"); // longer than the second proof can take (its token listed within 2 s)
        cluster.clientProps(JaasUtils.KAFKA_PLAIN_ADMIN, JaasUtils.KAFKA_PLAIN_ADMIN_PASSWORD)
                .forEach((k, v) -> props.put(ExporterConfig.ADMIN_PREFIX + k, v));
        try (LogExporter own = LogExporter.start(ExporterConfig.fromProperties(props));
             RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             Admin asUser1 = Admin.create(user1(false, null))) {
            own.refresh();
            DelegationToken first = asUser1.createDelegationToken().delegationToken().get();
            DelegationToken second = asUser1.createDelegationToken().delegationToken().get();
            awaitKnown(first.tokenInfo().tokenId());
            awaitKnown(second.tokenInfo().tokenId());
            RdmaConnection a = peer.connect(own.address()).get(10, TimeUnit.SECONDS);
            RdmaConnection b = peer.connect(own.address()).get(10, TimeUnit.SECONDS);

            prove(a, first, challenge(a), List.of(GRANTED, DENIED));
            long decided = own.aclDecisions();
            assertThat(decided).as("both topics the proof named decided before its answer").isEqualTo(2);
            prove(b, second, challenge(b), List.of(GRANTED, DENIED));
            assertThat(directory(b, GRANTED).status()).isEqualTo(SegmentDirectory.Status.OK);
            assertThat(directory(b, DENIED).status()).isEqualTo(SegmentDirectory.Status.NOT_AUTHORIZED);
            assertThat(own.aclDecisions()).as("the principal's decisions serve its other token").isEqualTo(decided);

            // The first token expired; the second renews the principal's decisions as they lapse (it asks first each
            // time), so only looking the first token up again can stop it.
            asUser1.expireDelegationToken(first.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp().get();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            SegmentDirectory.Status status;
            do {
                assertThat(System.nanoTime()).as("the expired token refused within 30 s").isLessThan(deadline);
                Thread.sleep(200);
                assertThat(directory(b, GRANTED).status()).as("the live token").isEqualTo(SegmentDirectory.Status.OK);
                status = directory(a, GRANTED).status();
            } while (status != SegmentDirectory.Status.NOT_AUTHORIZED);
            a.close();
            b.close();
        }
    }

    @Test
    void aNewConsumersFirstPollProvesItsTokenNamingItsTopicsSoTheyAreDecidedBeforeAnyDirectoryRequest() throws Exception {
        Map<String, Object> props = new HashMap<>(cluster.exporterProps(0, "127.0.0.1:0"));
        cluster.clientProps(JaasUtils.KAFKA_PLAIN_ADMIN, JaasUtils.KAFKA_PLAIN_ADMIN_PASSWORD)
                .forEach((k, v) -> props.put(ExporterConfig.ADMIN_PREFIX + k, v));
        try (LogExporter own = LogExporter.start(ExporterConfig.fromProperties(props))) { // nothing decided yet
            own.refresh();
            Map<String, Object> consumer = user1(true, "delegation-token");
            consumer.put("rdma.exporter.address", "127.0.0.1:" + own.address().getPort());
            try (RdmaKafkaConsumer<String, String> rdma = new RdmaKafkaConsumer<>(consumer, new StringDeserializer(), new StringDeserializer())) {
                rdma.assign(GRANTED_PARTITIONS);
                rdma.poll(Duration.ZERO); // connects and proves; its partitions are fetched through Kafka meanwhile
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (rdma.settingUpExporters() || own.authenticatedConnections() == 0) {
                    assertThat(System.nanoTime()).as("the token proven within 30 s (proofs refused: %d)", own.rejectedTokenProofs())
                            .isLessThan(deadline);
                    Thread.sleep(20);
                }
                assertThat(own.directoryRequests()).as("no poll since the first").isZero();
                assertThat(own.aclDecisions()).as("the assigned topic, decided as the proof named it").isEqualTo(1);
            }
        }
    }

    @Test
    void aProofRightAfterAnotherOfTheSameTokenIsCheckedWithoutAskingTheClusterAgain() throws Exception {
        try (RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             Admin asUser1 = Admin.create(user1(false, null));
             RdmaConnection first = peer.connect(exporter.address()).get(10, TimeUnit.SECONDS);
             RdmaConnection second = peer.connect(exporter.address()).get(10, TimeUnit.SECONDS);
             RdmaConnection third = peer.connect(exporter.address()).get(10, TimeUnit.SECONDS)) {
            DelegationToken token = asUser1.createDelegationToken().delegationToken().get();
            awaitKnown(token.tokenInfo().tokenId());
            long listedBefore = System.nanoTime();
            prove(first, token, challenge(first));
            long lookups = exporter.delegationTokenLookups();
            byte[] nonce = challenge(second);
            String id = token.tokenInfo().tokenId();
            assertRefused(third, new ExporterAuthentication.Proof(id, ExporterAuthentication.proof(new byte[64], challenge(third), id)),
                    "a forged proof of the token just listed");
            prove(second, token, nonce);
            long sinceListing = System.nanoTime() - listedBefore;
            // Under the listing's trusted age (a second) both proofs are checked against it; a machine that stalled
            // longer makes them ask the cluster again, as it should.
            assertThat(exporter.delegationTokenLookups() - lookups).as("describeDelegationToken calls for two proofs %d ms "
                    + "after the first proof's listing", TimeUnit.NANOSECONDS.toMillis(sinceListing))
                    .isLessThanOrEqualTo(sinceListing < TimeUnit.SECONDS.toNanos(1) ? 0 : 2);
            assertThat(directory(second, GRANTED).status()).isEqualTo(SegmentDirectory.Status.OK);
            assertThat(directory(third, GRANTED).status()).as("the forged proof's connection").isEqualTo(SegmentDirectory.Status.NOT_AUTHORIZED);
        }
    }

    @Test
    void aBurstOfForgedProofsCostsTheClusterAFewTokenLookupsAndAnHonestPeerStillGetsIn() throws Exception {
        // 20 connections at once, 10 forged proofs each: a proof needs a challenge of its own connection first. A proof
        // naming a token not listed yet waits up to TopicReadAuthorizer.TOKEN_ARRIVAL_WAIT for it, on shared lookups.
        int connections = 20;
        int rounds = 10;
        int burst = connections * rounds;
        long rejected = exporter.rejectedTokenProofs();
        long lookups = exporter.delegationTokenLookups();
        long authenticated = exporter.authenticatedConnections();
        try (RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             Admin asUser1 = Admin.create(user1(false, null))) {
            // Created first: by the burst's end both brokers have learnt it (one learns it a moment after the other).
            DelegationToken token = asUser1.createDelegationToken().delegationToken().get();
            awaitKnown(token.tokenInfo().tokenId());
            List<RdmaConnection> forgers = new ArrayList<>();
            long elapsedMillis;
            try (ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor()) {
                for (int i = 0; i < connections; i++) {
                    forgers.add(peer.connect(exporter.address()).get(10, TimeUnit.SECONDS));
                }
                long start = System.nanoTime();
                List<Future<?>> done = new ArrayList<>();
                for (RdmaConnection c : forgers) {
                    done.add(threads.submit(() -> {
                        for (int r = 0; r < rounds; r++) {
                            // First a token id the cluster does not know (each waits, together, for it to appear), then
                            // the real token's id with a forged HMAC.
                            String id = r == 0 ? "forged-token-" + r : token.tokenInfo().tokenId();
                            assertRefused(c, new ExporterAuthentication.Proof(id, ExporterAuthentication.proof(new byte[64],
                                    challenge(c), id)), "a forged proof");
                        }
                        return null;
                    }));
                }
                for (Future<?> f : done) {
                    f.get(60, TimeUnit.SECONDS);
                }
                elapsedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            } finally {
                forgers.forEach(RdmaConnection::close);
            }
            assertThat(exporter.rejectedTokenProofs() - rejected).as("forged proofs counted as refused").isEqualTo(burst);
            // TopicReadAuthorizer.TOKEN_LIST_INTERVAL: one describe per 100 ms at most, however many proofs wait.
            assertThat(exporter.delegationTokenLookups() - lookups)
                    .as("describeDelegationToken calls for %d proofs in %d ms", burst, elapsedMillis)
                    .isLessThanOrEqualTo(elapsedMillis / 100 + 2)
                    .isLessThan(burst / 4);

            try (RdmaConnection honest = peer.connect(exporter.address()).get(10, TimeUnit.SECONDS)) {
                prove(honest, token, challenge(honest));
                assertThat(exporter.authenticatedConnections()).isEqualTo(authenticated + 1);
                assertThat(directory(honest, GRANTED).status()).isEqualTo(SegmentDirectory.Status.OK);
            }
        }
    }

    @Test
    void internalTopicsStayUnexportedEvenForTheSuperUser() throws Exception {
        try (RdmaTransport peer = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
             RdmaConnection c = peer.connect(exporter.address()).get(10, TimeUnit.SECONDS)) {
            DelegationToken token = admin.createDelegationToken().delegationToken().get();
            awaitKnown(token.tokenInfo().tokenId());
            prove(c, token, challenge(c));
            assertThat(directory(c, GRANTED).status()).as("the super user reads every topic").isEqualTo(SegmentDirectory.Status.OK);
            SegmentDirectory.Response offsets = directory(c, OFFSETS.topic());
            assertThat(offsets.status()).isEqualTo(SegmentDirectory.Status.UNKNOWN_PARTITION);
            assertThat(offsets.segments()).isEmpty();
        }
    }

    private static void awaitKnown(String tokenId) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (admin.describeDelegationToken().delegationTokens().get().stream().noneMatch(t -> t.tokenInfo().tokenId().equals(tokenId))) {
            assertThat(System.nanoTime()).as("token %s known to the broker within 10 s", tokenId).isLessThan(deadline);
            Thread.sleep(50);
        }
    }

    private static void awaitStatus(RdmaConnection c, SegmentDirectory.Status want, String when) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        SegmentDirectory.Status status;
        while ((status = directory(c, GRANTED).status()) != want) {
            assertThat(System.nanoTime()).as("%s %s within 15 s, still %s", GRANTED, want, status).isLessThan(deadline);
            Thread.sleep(100);
        }
    }

    private static byte[] challenge(RdmaConnection c) {
        return ExporterAuthentication.nonce(c.requestAndWait(RequestTypes.KAFKA_AUTHENTICATE,
                ByteBuffer.wrap(new ExporterAuthentication.Challenge().toBytes())));
    }

    private static void prove(RdmaConnection c, DelegationToken token, byte[] nonce) {
        prove(c, token, nonce, List.of());
    }

    private static void prove(RdmaConnection c, DelegationToken token, byte[] nonce, List<String> topics) {
        String id = token.tokenInfo().tokenId();
        c.requestAndWait(RequestTypes.KAFKA_AUTHENTICATE, ByteBuffer.wrap(
                new ExporterAuthentication.Proof(id, ExporterAuthentication.proof(token.hmac(), nonce, id), topics).toBytes()));
    }

    private static void assertRefused(RdmaConnection c, ExporterAuthentication.Proof proof, String what) {
        assertThatThrownBy(() -> c.requestAndWait(RequestTypes.KAFKA_AUTHENTICATE, ByteBuffer.wrap(proof.toBytes()))).as(what)
                .isInstanceOfSatisfying(RemoteRequestException.class,
                        e -> assertThat(e.status()).isEqualTo(RemoteRequestException.Status.REFUSED));
    }

    private static SegmentDirectory.Response directory(RdmaConnection c, String topic) {
        return SegmentDirectory.Response.fromBytes(c.requestAndWait(RequestTypes.KAFKA_DIRECTORY,
                ByteBuffer.wrap(new SegmentDirectory.Request(topic, 0, 0).toBytes())));
    }

    private static Map<TopicPartition, List<String>> drain(Consumer<String, String> consumer, int count) {
        Map<TopicPartition, List<String>> out = new TreeMap<>(java.util.Comparator.comparing(TopicPartition::toString));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        int seen = 0;
        while (seen < count) {
            assertThat(System.nanoTime()).as("%d of %d records within 60 s", seen, count).isLessThan(deadline);
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                out.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), tp -> new ArrayList<>()).add(r.offset() + ":" + r.value());
                seen++;
            }
        }
        return out;
    }
}
