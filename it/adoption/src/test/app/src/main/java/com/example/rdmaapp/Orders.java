package com.example.rdmaapp;

import io.rdma4j.kafka.RdmaConsumerFactory;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/** The README's Kafka quick start: a consumer that fetches by RDMA READ, enabled by client properties. */
final class Orders {

    private Orders() {
    }

    /** A consumer configured by {@code consumer.properties} (the README's properties, verbatim). */
    static Consumer<String, String> consumer() {
        Properties props = new Properties();
        try (InputStream in = Orders.class.getResourceAsStream("/consumer.properties")) {
            props.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Consumer<String, String> consumer = RdmaConsumerFactory.create(props, new StringDeserializer(), new StringDeserializer());
        return consumer;
    }
}
