package io.rdma4j.kafka.streams;

import io.rdma4j.kafka.RdmaConsumerConfig;
import io.rdma4j.kafka.RdmaConsumerFactory;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.KafkaClientSupplier;

import java.util.HashMap;
import java.util.Map;

/**
 * Gives Kafka Streams consumers that fetch by RDMA READ: the main consumer of each stream thread, the restore
 * consumer (changelogs, on restore and for standby tasks) and the global consumer. Producers and the admin client are
 * Kafka's own.
 *
 * <pre>{@code
 * KafkaStreams streams = new KafkaStreams(topology, props,
 *         new RdmaKafkaClientSupplier(Map.of("rdma.fetch.enabled", "true", "rdma.exporter.address", "10.0.0.5:9299")));
 * }</pre>
 *
 * The {@code rdma.*} settings come from the constructor, or from the Streams properties with the consumer prefixes
 * Streams already knows ({@code consumer.rdma.fetch.enabled=true}, {@code main.consumer.}, {@code restore.consumer.},
 * {@code global.consumer.}): Streams drops unprefixed keys it does not know before they reach a supplier. The
 * constructor's settings win over prefixed ones. Under {@code processing.guarantee=exactly_once_v2} Streams makes
 * its consumers {@code read_committed}, which the RDMA consumer serves too.
 */
// Kafka Streams' types in this API need no 'requires transitive': a Streams application requires kafka.streams.
@SuppressWarnings("exports")
public final class RdmaKafkaClientSupplier implements KafkaClientSupplier {

    private final Map<String, Object> rdmaConfigs;

    /** The {@code rdma.*} settings for every consumer (others are ignored: Streams' own properties configure Kafka). */
    public RdmaKafkaClientSupplier(Map<String, ?> rdmaConfigs) {
        Map<String, Object> own = new HashMap<>();
        rdmaConfigs.forEach((k, v) -> {
            if (!k.startsWith(RdmaConsumerConfig.PREFIX)) {
                throw new IllegalArgumentException("RdmaKafkaClientSupplier takes only rdma.* settings, got '" + k
                        + "': set Kafka's own settings in the Streams properties");
            }
            own.put(k, v);
        });
        this.rdmaConfigs = Map.copyOf(own);
    }

    /** Takes every {@code rdma.*} setting from the Streams properties (prefixed, see above). */
    public RdmaKafkaClientSupplier() {
        this(Map.of());
    }

    @Override
    public Admin getAdmin(Map<String, Object> config) {
        return Admin.create(config);
    }

    @Override
    public Producer<byte[], byte[]> getProducer(Map<String, Object> config) {
        return new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    }

    @Override
    public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) {
        return consumer(config);
    }

    @Override
    public Consumer<byte[], byte[]> getRestoreConsumer(Map<String, Object> config) {
        return consumer(config);
    }

    @Override
    public Consumer<byte[], byte[]> getGlobalConsumer(Map<String, Object> config) {
        return consumer(config);
    }

    private Consumer<byte[], byte[]> consumer(Map<String, Object> config) {
        Map<String, Object> merged = new HashMap<>(config);
        merged.putAll(rdmaConfigs);
        return RdmaConsumerFactory.create(merged, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }
}
