package com.example.rdmaapp;

import io.rdma4j.kafka.RdmaConsumerFactory;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.util.Properties;

/** The README's Kafka quick start: a consumer that fetches by RDMA READ, enabled by client properties. */
final class Orders {

    private Orders() {
    }

    static Consumer<String, String> consumer(String bootstrapServers, String exporterAddress) {
        Properties props = new Properties();
        props.setProperty("bootstrap.servers", bootstrapServers);
        props.setProperty("group.id", "orders");
        props.setProperty("rdma.fetch.enabled", "true");
        props.setProperty("rdma.exporter.address", exporterAddress);
        Consumer<String, String> consumer = RdmaConsumerFactory.create(props, new StringDeserializer(), new StringDeserializer());
        return consumer;
    }
}
