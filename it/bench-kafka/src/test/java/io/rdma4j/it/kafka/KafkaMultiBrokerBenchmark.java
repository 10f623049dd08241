package io.rdma4j.it.kafka;

import io.rdma4j.it.kafka.KafkaMixedWorkloadBenchmark.Round;
import io.rdma4j.it.kafka.KafkaMixedWorkloadBenchmark.Variant;
import io.rdma4j.testsupport.kafka.MixedWorkload;
import org.apache.kafka.clients.admin.NewTopic;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The mixed workload of {@link KafkaMixedWorkloadBenchmark} on a cluster: four brokers in this JVM (broker N advertising
 * 127.0.0.N), an exporter per broker on one port, eight partitions with two replicas each and leaders on every
 * broker. The RDMA consumer is given only that port and reads each partition from its leader's exporter; rotating
 * rounds against a plain KafkaConsumer, the median counts.
 */
class KafkaMultiBrokerBenchmark {

    static final int BROKERS = 4;
    static final int PARTITIONS = 8;
    static final int RECORDS = Integer.getInteger("bench.mixed.records", 100_000);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 5);

    @Test
    void rdmaVersusPlainOnAFourBrokerCluster() throws Exception {
        try (BenchBroker cluster = new BenchBroker(BROKERS)) {
            String topic = "cluster-mixed";
            Map<Integer, List<Integer>> assignment = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                int leader = p % BROKERS;
                assignment.put(p, List.of(leader, (leader + 1 + p / BROKERS) % BROKERS));
            }
            cluster.createTopics(new NewTopic(topic, assignment));
            long bytes = MixedWorkload.produce(cluster.bootstrap(), topic, "none", RECORDS, Map.of("acks", "all"));
            System.out.printf("produced %s: %d records, %.1f MB over %d partitions, leaders on %d brokers%n",
                    topic, RECORDS, bytes / 1e6, PARTITIONS, BROKERS);
            List<Variant> variants = List.of(Variant.PLAIN, Variant.RDMA_DEFAULT);
            Map<Variant, List<Round>> rounds = new EnumMap<>(Variant.class);
            for (int w = 0; w < KafkaMixedWorkloadBenchmark.WARM_UP_READS; w++) {
                for (Variant v : variants) {
                    KafkaMixedWorkloadBenchmark.read(cluster, topic, v, PARTITIONS, RECORDS); // warm-up
                }
            }
            for (Variant v : variants) {
                rounds.put(v, new ArrayList<>());
            }
            for (int i = 0; i < ROUNDS; i++) {
                for (int k = 0; k < variants.size(); k++) {
                    Variant v = variants.get((i + k) % variants.size());
                    rounds.get(v).add(KafkaMixedWorkloadBenchmark.read(cluster, topic, v, PARTITIONS, RECORDS));
                }
            }
            KafkaMixedWorkloadBenchmark.report(topic + " on " + BROKERS + " brokers", rounds);
            for (var e : cluster.exporters) {
                System.out.printf("  exporter %s: %d directory requests%n", e.address(), e.directoryRequests());
            }
        }
    }
}
