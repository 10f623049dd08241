package io.rdma4j.kafka;

import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** How a consumer chooses the exporter of each partition from its cluster metadata. */
class ExporterLocatorTest {

    private static final TopicPartition TP = new TopicPartition("t", 0);
    private static final int PORT = 9299;
    private static final Node B1 = new Node(1, "broker1", 9092, "rack-a");
    private static final Node B2 = new Node(2, "broker2", 9092, "rack-b");
    private static final Node B3 = new Node(3, "broker3", 9092, "rack-c");

    private final Map<String, List<PartitionInfo>> metadata = new HashMap<>();

    private void partition(Node leader, Node[] replicas, Node[] isr) {
        metadata.put("t", List.of(new PartitionInfo("t", 0, leader, replicas, isr)));
    }

    private ExporterLocator perBroker(String rack) {
        return ExporterLocator.perBroker(PORT, rack, topic -> {
            if (!metadata.containsKey(topic)) {
                throw new TimeoutException("no metadata for " + topic);
            }
            return metadata.get(topic);
        });
    }

    private static InetSocketAddress exporterOf(Node n) {
        return new InetSocketAddress(n.host(), PORT);
    }

    @Test
    void theConfiguredAddressServesEveryPartitionAndIsNeverOutdated() {
        InetSocketAddress address = new InetSocketAddress("10.0.0.5", 9299);
        ExporterLocator.Target t = ExporterLocator.fixed(address).locate(TP);
        assertThat(t.address()).isEqualTo(address);
        assertThat(t.outdatedBy(7)).isFalse();
    }

    @Test
    void withAPortOffsetBrokersSharingAHostEachHaveTheirOwnExporter() {
        Node a = new Node(1, "localhost", 9092);
        Node b = new Node(2, "localhost", 9093);
        RdmaConsumerConfig config = RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.EXPORTER_PORT_OFFSET, "207"));
        metadata.put("t", List.of(new PartitionInfo("t", 0, a, new Node[] {a, b}, new Node[] {a, b}),
                new PartitionInfo("t", 1, b, new Node[] {b, a}, new Node[] {b, a})));
        ExporterLocator locator = ExporterLocator.perBroker(config::exporterPortFor, null, metadata::get);
        assertThat(locator.locate(TP).address()).isEqualTo(new InetSocketAddress("localhost", 9299));
        assertThat(locator.locate(new TopicPartition("t", 1)).address()).isEqualTo(new InetSocketAddress("localhost", 9300));

        assertThatThrownBy(() -> RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.EXPORTER_PORT_OFFSET, "207",
                RdmaConsumerConfig.EXPORTER_PORT, "9299"))).hasMessageContaining("not both");
        assertThatThrownBy(() -> RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.EXPORTER_PORT_OFFSET, "-1")))
                .hasMessageContaining("needs a number from 0 to 65535");
        assertThatThrownBy(() -> RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.EXPORTER_PORT_OFFSET, "x")))
                .hasMessageContaining("needs a number from 0 to 65535");
    }

    @Test
    void theLikelyExportersAreTheBootstrapBrokersOnTheirExporterPortsOrTheConfiguredOne() {
        RdmaConsumerConfig config = RdmaConsumerConfig.from(Map.of(RdmaConsumerConfig.EXPORTER_PORT_OFFSET, "207"));
        ExporterLocator locator = ExporterLocator.perBroker(config::exporterPortFor, null, metadata::get);
        assertThat(locator.likelyExporters("localhost:9092, 127.0.0.1:9093,127.0.0.1:9092,no-port,[::1]:65500"))
                .as("the second 9092 is the first again; no port, or one the offset pushes out of range, is left out")
                .containsExactly(new InetSocketAddress("localhost", 9299), new InetSocketAddress("127.0.0.1", 9300));
        assertThat(locator.likelyExporters(List.of("localhost:9094"))).containsExactly(new InetSocketAddress("localhost", 9301));
        assertThat(locator.likelyExporters(null)).isEmpty();
        assertThat(perBroker(null).likelyExporters("localhost:9092")).containsExactly(new InetSocketAddress("localhost", PORT));

        InetSocketAddress address = new InetSocketAddress("127.0.0.1", 9299);
        assertThat(ExporterLocator.fixed(address).likelyExporters("localhost:9092,localhost:9093")).containsExactly(address);
    }

    @Test
    void aWakeupTakenByTheMetadataCallIsArmedAgainForTheNextPoll() {
        java.util.concurrent.atomic.AtomicInteger armed = new java.util.concurrent.atomic.AtomicInteger();
        ExporterLocator locator = ExporterLocator.perBroker(brokerPort -> PORT, null, topic -> {
            throw new org.apache.kafka.common.errors.WakeupException();
        }, armed::incrementAndGet);
        assertThat(locator.locate(TP)).as("not located now").isNull();
        assertThat(armed.get()).as("the consumer's wakeup() armed again").isEqualTo(1);
        assertThat(locator.located(TP)).isNull();
    }

    @Test
    void eachPartitionIsReadFromItsLeadersExporterOnThePortConvention() {
        partition(B2, new Node[] {B2, B3}, new Node[] {B2, B3});
        ExporterLocator.Target t = perBroker(null).locate(TP);
        assertThat(t.address()).isEqualTo(exporterOf(B2));
        assertThat(t.nodeId()).isEqualTo(2);
        assertThat(t.outdatedBy(2)).as("the exporter agrees").isFalse();
        assertThat(t.outdatedBy(-1)).as("the exporter does not know the leader").isFalse();
        assertThat(t.outdatedBy(3)).as("the exporter names another leader").isTrue();
    }

    @Test
    void withClientRackAnInSyncReplicaInThatRackIsChosenAsKafkasRackAwareSelectorWould() {
        partition(B1, new Node[] {B1, B2, B3}, new Node[] {B1, B2});
        assertThat(perBroker("rack-b").locate(TP).address()).as("the in-sync follower in rack-b").isEqualTo(exporterOf(B2));
        assertThat(perBroker("rack-b").locate(TP).leaderId()).as("chosen for leader 1").isEqualTo(1);
        assertThat(perBroker("rack-c").locate(TP).address()).as("rack-c's replica is not in sync: the leader")
                .isEqualTo(exporterOf(B1));
        assertThat(perBroker("rack-a").locate(TP).address()).as("the leader is in the rack").isEqualTo(exporterOf(B1));
        assertThat(perBroker("rack-z").locate(TP).address()).as("no replica in the rack").isEqualTo(exporterOf(B1));
    }

    @Test
    void aLeaderPublishedByAnExporterIsFollowedWhileTheMetadataIsBehind() {
        partition(B1, new Node[] {B1, B2}, new Node[] {B1, B2});
        ExporterLocator locator = perBroker(null);
        assertThat(locator.locate(TP).address()).isEqualTo(exporterOf(B1));
        assertThat(locator.addressable(TP, 2)).as("broker 2 has an address").isTrue();
        locator.leaderMoved(TP, 2);
        ExporterLocator.Target moved = locator.locate(TP);
        assertThat(moved.address()).isEqualTo(exporterOf(B2));
        assertThat(moved.outdatedBy(2)).isFalse();
        assertThat(locator.locate(TP)).as("kept until something goes wrong with it").isEqualTo(moved);
        locator.forget(TP);
        assertThat(locator.locate(TP).address()).as("then the metadata again").isEqualTo(exporterOf(B1));
    }

    @Test
    void aPublishedLeaderWithoutAnAddressLeavesTheMetadatasLeader() {
        Node offline = new Node(3, "", -1);
        partition(B1, new Node[] {B1, offline}, new Node[] {B1});
        ExporterLocator locator = perBroker(null);
        assertThat(locator.addressable(TP, 3)).as("broker 3 is offline").isFalse();
        assertThat(locator.addressable(TP, 9)).as("broker 9 holds no replica").isFalse();
        locator.leaderMoved(TP, 3);
        assertThat(locator.locate(TP).address()).as("broker 3 is offline").isEqualTo(exporterOf(B1));
        locator.leaderMoved(TP, 9);
        assertThat(locator.locate(TP).address()).as("broker 9 holds no replica").isEqualTo(exporterOf(B1));
    }

    @Test
    void noLeaderOrNoMetadataMeansNoExporter() {
        ExporterLocator locator = perBroker(null);
        assertThat(locator.locate(TP)).as("metadata not known").isNull();
        partition(null, new Node[] {B1}, new Node[] {});
        assertThat(locator.locate(TP)).as("no leader").isNull();
        partition(B1, new Node[] {B1}, new Node[] {B1});
        assertThat(locator.locate(new TopicPartition("t", 5))).as("no such partition").isNull();
        assertThat(locator.locate(TP).address()).isEqualTo(exporterOf(B1));
    }
}
