package com.example.rdmaapp;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.kafka.RdmaKafkaConsumer;
import io.rdma4j.spring.boot.RdmaEndpoint;
import org.apache.kafka.clients.consumer.Consumer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RdmaAppTest {

    @Test
    void publishesAndReadsARegionThroughTheStarter() {
        try (ConfigurableApplicationContext app = start();
             Arena arena = Arena.ofShared()) {
            RdmaEndpoint endpoint = app.getBean(RdmaEndpoint.class);
            assertTrue(endpoint.isRunning(), "the endpoint serves peers");
            System.out.println("[rdma-app] provider: " + app.getBean(RdmaTransport.class).selection());
            MemorySegment sink = arena.allocate(1 << 20);
            sink.fill((byte) 0x5A);
            long read = app.getBean(Reader.class).load(endpoint.localAddress(), sink);
            assertEquals(1 << 20, read);
            assertEquals(0, sink.get(ValueLayout.JAVA_BYTE, 12345), "the region's zeroed bytes replaced the sink's");
            try (Arena confined = Arena.ofConfined()) {
                IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                        () -> app.getBean(Reader.class).load(endpoint.localAddress(), confined.allocate(1 << 20)));
                assertTrue(refused.getMessage().contains("Arena.ofShared()"), "the README's advice: " + refused.getMessage());
            }
        }
    }

    /** The actuator answers as the README's application.yml promises: health details, info and meters of rdma4j. */
    @Test
    void actuatorShowsRdma4j() throws Exception {
        try (ConfigurableApplicationContext app = start()) {
            String base = "http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port") + "/actuator";
            assertContains(get(base + "/health/rdma4j"), "\"provider\"", "\"connections\"");
            assertContains(get(base + "/info"), "\"rdma4j\"", "\"provider\"");
            assertContains(get(base + "/metrics/rdma4j.connections.open"), "\"rdma4j.connections.open\"", "\"provider\"");
        }
    }

    @Test
    void kafkaConsumerFromClientProperties() {
        try (Consumer<String, String> consumer = Orders.consumer()) {
            RdmaKafkaConsumer<?, ?> rdma = assertInstanceOf(RdmaKafkaConsumer.class, consumer);
            assertTrue(rdma.rdmaActive(), "fetches by RDMA READ");
        }
    }

    /** Port 0 for RDMA and HTTP: builds on one machine must not fight over 7471 or 8080; the rest is application.yml. */
    private static ConfigurableApplicationContext start() {
        return SpringApplication.run(RdmaApp.class, "--rdma4j.endpoint.port=0", "--server.port=0");
    }

    private static String get(String url) throws IOException, InterruptedException {
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, response.statusCode(), "GET " + url + ": " + response.body());
            return response.body();
        }
    }

    private static void assertContains(String body, String... parts) {
        for (String part : parts) {
            assertTrue(body.contains(part), "expected " + part + " in " + body);
        }
    }
}
