package io.rdma4j.samples.spring;

import io.rdma4j.spring.boot.RdmaEndpoint;
import io.rdma4j.spring.boot.RdmaRegion;
import io.rdma4j.spring.boot.RdmaTemplate;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;

/**
 * Two Spring Boot applications in one process: a publisher (web + actuator on port 8080, rdma4j
 * endpoint on 127.0.0.1:7471) that publishes a 64 MiB region with {@link RdmaRegion}, and a reader that
 * fetches it through {@link RdmaTemplate} and checks every byte. The publisher keeps running so its
 * actuator can be queried; pass {@code --exit} to stop after the transfer.
 */
public final class SpringRegionsDemo {

    static final long SIZE = 64L << 20;

    @SpringBootApplication
    public static class Publisher {
        @Bean
        Dataset dataset() {
            return new Dataset();
        }
    }

    public static class Dataset {
        /** The region owns {@code arena} and closes it after it is deregistered, when the publisher closes. */
        @RdmaRegion("demo-dataset")
        MemorySegment dataset(Arena arena) {
            MemorySegment segment = arena.allocate(SIZE, 64);
            fill(segment);
            return segment;
        }
    }

    @SpringBootApplication
    public static class Reader {
    }

    static void fill(MemorySegment segment) {
        for (long i = 0; i < segment.byteSize() / 8; i++) {
            segment.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
        }
    }

    public static void main(String[] args) {
        SpringApplication publisherApp = new SpringApplication(Publisher.class);
        ConfigurableApplicationContext publisher = publisherApp.run("--server.address=127.0.0.1", "--server.port=8080",
                "--rdma4j.endpoint.enabled=true", "--rdma4j.endpoint.port=7471",
                "--management.endpoints.web.exposure.include=health,info,metrics",
                "--management.endpoint.health.show-details=always");
        SpringApplication readerApp = new SpringApplication(Reader.class);
        readerApp.setWebApplicationType(WebApplicationType.NONE);
        try (ConfigurableApplicationContext reader = readerApp.run();
             Arena arena = Arena.ofShared()) {
            InetSocketAddress peer = publisher.getBean(RdmaEndpoint.class).localAddress();
            long start = System.nanoTime();
            MemorySegment copy = reader.getBean(RdmaTemplate.class).read(peer, "demo-dataset", arena);
            double seconds = (System.nanoTime() - start) / 1e9;
            MemorySegment expected = arena.allocate(SIZE, 64);
            fill(expected);
            boolean identical = copy.mismatch(expected) == -1;
            RdmaTemplate template = reader.getBean(RdmaTemplate.class);
            System.out.println("[spring-demo] provider: " + template.transport().selection());
            System.out.printf("[spring-demo] read %d MiB region 'demo-dataset' from %s in %.3f s (%.0f MiB/s), bytes identical: %s%n",
                    SIZE >> 20, peer, seconds, (SIZE >> 20) / seconds, identical);
            if (!identical) {
                throw new IllegalStateException("the region read differs from what the publisher published");
            }
        }
        System.out.println("[spring-demo] publisher health: " + httpGet("http://127.0.0.1:8080/actuator/health/rdma4j"));
        if (java.util.Arrays.asList(args).contains("--exit")) {
            publisher.close();
            System.out.println("[spring-demo] OK");
        } else {
            System.out.println("[spring-demo] publisher running (Ctrl-C to stop):");
            System.out.println("  curl http://127.0.0.1:8080/actuator/health/rdma4j");
            System.out.println("  curl http://127.0.0.1:8080/actuator/info");
            System.out.println("  curl http://127.0.0.1:8080/actuator/metrics/rdma4j.operations");
            System.out.println("  curl http://127.0.0.1:8080/actuator/metrics/rdma4j.served.bytes");
        }
    }

    private static String httpGet(String url) {
        try (var client = java.net.http.HttpClient.newHttpClient()) {
            return client.send(java.net.http.HttpRequest.newBuilder(java.net.URI.create(url)).build(),
                    java.net.http.HttpResponse.BodyHandlers.ofString()).body();
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException("could not read " + url, e);
        }
    }
}
