package com.example.rdmaapp;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.spring.boot.RdmaEndpoint;
import org.apache.kafka.clients.consumer.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RdmaAppTest {

    @Test
    void publishesAndReadsARegionThroughTheStarter() {
        // Port 0: builds on one machine must not fight over the README's 7471; everything else is application.yml.
        try (ConfigurableApplicationContext app = SpringApplication.run(RdmaApp.class, "--rdma4j.endpoint.port=0");
             Arena arena = Arena.ofShared()) {
            RdmaEndpoint endpoint = app.getBean(RdmaEndpoint.class);
            assertTrue(endpoint.isRunning(), "the endpoint serves peers");
            System.out.println("[rdma-app] provider: " + app.getBean(RdmaTransport.class).selection());
            MemorySegment sink = arena.allocate(1 << 20);
            sink.fill((byte) 0x5A);
            long read = app.getBean(Reader.class).load(endpoint.localAddress(), sink);
            assertEquals(1 << 20, read);
            assertEquals(0, sink.get(ValueLayout.JAVA_BYTE, 12345), "the region's zeroed bytes replaced the sink's");
        }
    }

    @Test
    void kafkaConsumerFromClientProperties() {
        try (Consumer<String, String> consumer = Orders.consumer()) {
            RdmaKafkaConsumer<?, ?> rdma = assertInstanceOf(RdmaKafkaConsumer.class, consumer);
            assertTrue(rdma.rdmaActive(), "fetches by RDMA READ");
        }
    }
}
