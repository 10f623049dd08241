package rdma4j.kafka.app;

import io.rdma4j.kafka.RdmaConsumerFactory;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.util.Properties;

/**
 * Creates an RDMA Kafka consumer from client properties, as the README's Kafka quick start does: the Kafka clients
 * (an automatic module) create its internal consumer and instantiate the module's interceptor by name. Neither the
 * broker nor the exporter needs to exist for that.
 */
public final class Main {

    private Main() {
    }

    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", "127.0.0.1:9092");
        props.put("group.id", "orders");
        props.put("rdma.fetch.enabled", "true");
        props.put("rdma.exporter.address", "127.0.0.1:9299");
        props.put("rdma.shared-secret", "change-me-to-16-bytes-or-more");
        props.put("rdma.provider", "tcp");
        try (Consumer<String, String> consumer = RdmaConsumerFactory.create(props, new StringDeserializer(),
                new StringDeserializer())) {
            RdmaKafkaConsumer<?, ?> rdma = (RdmaKafkaConsumer<?, ?>) consumer;
            System.out.println("CONSUMER " + consumer.getClass().getName() + " in " + consumer.getClass().getModule().getName()
                    + ", rdmaActive=" + rdma.rdmaActive() + ", clients in " + Consumer.class.getModule().getName());
        }
    }
}
