package io.rdma4j.kafka;

import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.utils.Utils;

import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/**
 * Which log exporter serves each partition. With {@code rdma.exporter.address} set, that one exporter serves every
 * partition (a single-broker set-up). Otherwise each broker runs an exporter at the host it advertises to clients, on
 * {@code rdma.exporter.port} or on the broker's advertised port plus {@code rdma.exporter.port.offset} (brokers sharing
 * a host), and a partition is read from the replica Kafka would fetch it from: the leader or, when
 * the consumer sets {@code client.rack}, an in-sync replica in that rack (KIP-392's {@code RackAwareReplicaSelector}).
 * Brokers and leaders come from the consumer's own cluster metadata; an exporter whose published leader differs
 * ({@link #leaderMoved}) is a sign that metadata is behind an election: the published leader is chosen instead, once (an
 * exporter can be behind too; two that disagree make the fetch fall back, see the fetcher). Used by the polling thread only.
 */
final class ExporterLocator {

    /**
     * Where to read a partition.
     *
     * @param nodeId   the broker whose exporter it is, -1 for the configured address
     * @param leaderId the leader this choice was made for, -1 when not checked (the configured address)
     */
    record Target(InetSocketAddress address, int nodeId, int leaderId) {

        /** Whether an exporter publishing {@code publishedLeader} shows this choice was made for another leader. */
        boolean outdatedBy(int publishedLeader) {
            return leaderId >= 0 && publishedLeader >= 0 && publishedLeader != leaderId;
        }
    }

    /** Thrown where the exporter read publishes another leader than the one it was chosen for (see {@link #leaderMoved}). */
    static final class LeaderMoved extends RuntimeException {
        final int leaderId;

        LeaderMoved(int leaderId) {
            super(null, null, false, false); // Control flow: no stack trace.
            this.leaderId = leaderId;
        }
    }

    private final InetSocketAddress override;
    private final java.util.function.IntUnaryOperator exporterPort;
    private final String rack;
    private final Function<String, List<PartitionInfo>> metadata;
    /** Arms the consumer's wakeup() again after the metadata call took it ({@link #partitionInfo}). */
    private final Runnable wakeUpAgain;
    private final Map<TopicPartition, Target> located = new HashMap<>();
    private final Map<TopicPartition, Integer> publishedLeaders = new HashMap<>();

    private ExporterLocator(InetSocketAddress override, java.util.function.IntUnaryOperator exporterPort, String rack,
                            Function<String, List<PartitionInfo>> metadata, Runnable wakeUpAgain) {
        this.override = override;
        this.exporterPort = exporterPort;
        this.rack = rack == null || rack.isBlank() ? null : rack;
        this.metadata = metadata;
        this.wakeUpAgain = wakeUpAgain;
    }

    /** Every partition from the exporter at {@code address}. */
    static ExporterLocator fixed(InetSocketAddress address) {
        return new ExporterLocator(address, brokerPort -> -1, null, topic -> List.of(), () -> { });
    }

    /**
     * Each partition from the exporter of its chosen replica's broker, at {@code port}.
     *
     * @param rack     the consumer's {@code client.rack}, or null
     * @param metadata a topic's partitions as the consumer's cluster metadata knows them
     */
    static ExporterLocator perBroker(int port, String rack, Function<String, List<PartitionInfo>> metadata) {
        return perBroker(brokerPort -> port, rack, metadata);
    }

    /** Each partition from the exporter of its chosen replica's broker, on the port {@code exporterPort} gives for the broker's. */
    static ExporterLocator perBroker(java.util.function.IntUnaryOperator exporterPort, String rack,
                                     Function<String, List<PartitionInfo>> metadata) {
        return perBroker(exporterPort, rack, metadata, () -> { });
    }

    /**
     * As above; {@code wakeUpAgain} arms the consumer's {@code wakeup()} again when the metadata call took it, so that
     * the next poll throws the {@code WakeupException} where a KafkaConsumer's would.
     */
    static ExporterLocator perBroker(java.util.function.IntUnaryOperator exporterPort, String rack,
                                     Function<String, List<PartitionInfo>> metadata, Runnable wakeUpAgain) {
        return new ExporterLocator(null, exporterPort, rack, metadata, wakeUpAgain);
    }

    /**
     * The exporters partitions are likely to be read from, known before any metadata: the configured one, else those of
     * the brokers in {@code bootstrapServers} (Kafka's {@code host:port} list), so that a new consumer connects to them
     * while its KafkaConsumer fetches metadata and offsets. Entries that do not parse or resolve are left out: the
     * KafkaConsumer reports them.
     */
    List<InetSocketAddress> likelyExporters(Object bootstrapServers) {
        if (override != null) {
            return List.of(override);
        }
        List<?> entries = bootstrapServers instanceof List<?> l ? l
                : bootstrapServers == null ? List.of() : List.of(bootstrapServers.toString().split(","));
        List<InetSocketAddress> likely = new java.util.ArrayList<>();
        for (Object entry : entries) {
            String text = String.valueOf(entry).trim();
            String host = Utils.getHost(text);
            Integer port = Utils.getPort(text);
            if (host == null || port == null) {
                continue;
            }
            try {
                InetSocketAddress exporter = new InetSocketAddress(host, exporterPort.applyAsInt(port));
                if (!exporter.isUnresolved() && !likely.contains(exporter)) {
                    likely.add(exporter);
                }
            } catch (IllegalArgumentException noPort) { // The port offset leaves the port range.
                continue;
            }
        }
        return likely;
    }

    /** Where to read {@code tp}, or null while its replicas are not known (no leader, no metadata yet). */
    Target locate(TopicPartition tp) {
        if (override != null) {
            return new Target(override, -1, -1);
        }
        Target target = located.get(tp);
        if (target != null) {
            return target;
        }
        PartitionInfo info = partitionInfo(tp);
        if (info == null) {
            return null;
        }
        Node leader = info.leader();
        Integer published = publishedLeaders.remove(tp);
        if (published != null && (leader == null || leader.id() != published)) {
            // The exporter's word against the metadata's; but a broker the metadata knows no address of (offline,
            // not a replica) cannot be read from, and then the metadata's leader stands.
            Node named = replica(info.replicas(), published);
            if (named != null && !named.isEmpty()) {
                leader = named;
            }
        }
        if (leader == null || leader.isEmpty()) {
            return null;
        }
        Node chosen = leader;
        if (rack != null && !rack.equals(leader.rack())) {
            for (Node n : info.inSyncReplicas()) {
                if (rack.equals(n.rack()) && !n.isEmpty()) {
                    chosen = n;
                    break;
                }
            }
        }
        target = new Target(new InetSocketAddress(chosen.host(), exporterPort.applyAsInt(chosen.port())), chosen.id(), leader.id());
        located.put(tp, target);
        return target;
    }

    /** Where {@code tp} is read, as last located; null when it is not located now. Asks for no metadata. */
    Target located(TopicPartition tp) {
        return override != null ? new Target(override, -1, -1) : located.get(tp);
    }

    /**
     * Whether the consumer's metadata has an address for broker {@code nodeId} among {@code tp}'s replicas. It has none
     * for a broker that was offline when the metadata was last refreshed, even when it is back now.
     */
    boolean addressable(TopicPartition tp, int nodeId) {
        PartitionInfo info = partitionInfo(tp);
        Node named = info == null ? null : replica(info.replicas(), nodeId);
        return named != null && !named.isEmpty();
    }

    /** The exporter read for {@code tp} publishes {@code leaderId} as its leader: choose again for that leader. */
    void leaderMoved(TopicPartition tp, int leaderId) {
        located.remove(tp);
        publishedLeaders.put(tp, leaderId);
    }

    /** Choose again from the metadata next time (the exporter was unreachable or did not serve the partition). */
    void forget(TopicPartition tp) {
        located.remove(tp);
        publishedLeaders.remove(tp);
    }

    /** Forgets partitions no longer assigned. */
    void retain(Set<TopicPartition> assigned) {
        located.keySet().retainAll(assigned);
        publishedLeaders.keySet().retainAll(assigned);
    }

    private PartitionInfo partitionInfo(TopicPartition tp) {
        List<PartitionInfo> infos;
        try {
            infos = metadata.apply(tp.topic());
        } catch (WakeupException e) {
            // The application's wakeup(), taken by this lookup in the middle of a poll that may hold records already:
            // armed again, it ends the next poll before that fetches anything, as KafkaConsumer's would.
            wakeUpAgain.run();
            return null;
        } catch (KafkaException e) {
            return null; // Not known yet, or not authorized: the normal fetch path reports it.
        }
        if (infos != null) {
            for (PartitionInfo info : infos) {
                if (info.partition() == tp.partition()) {
                    return info;
                }
            }
        }
        return null;
    }

    private static Node replica(Node[] replicas, int id) {
        for (Node n : replicas) {
            if (n.id() == id) {
                return n;
            }
        }
        return null;
    }
}
