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
import java.nio.file.Files;
import java.nio.file.Path;

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

    public static void main(String[] args) throws java.io.IOException {
        SpringApplication publisherApp = new SpringApplication(Publisher.class);
        ConfigurableApplicationContext publisher = publisherApp.run("--spring.application.name=publisher",
                "--server.address=127.0.0.1", "--server.port=8080",
                "--rdma4j.endpoint.enabled=true", "--rdma4j.endpoint.port=7471",
                "--management.endpoints.web.exposure.include=health,info,metrics",
                "--management.endpoint.health.show-details=always");
        System.out.println("[spring-demo] publisher app: web on 127.0.0.1:8080, region 'demo-dataset' ("
                + (SIZE >> 20) + " MiB) published on the rdma4j endpoint " + publisher.getBean(RdmaEndpoint.class).localAddress());
        SpringApplication readerApp = new SpringApplication(Reader.class);
        readerApp.setWebApplicationType(WebApplicationType.NONE);
        String selection;
        double seconds;
        try (ConfigurableApplicationContext reader = readerApp.run("--spring.application.name=reader");
             Arena arena = Arena.ofShared()) {
            InetSocketAddress peer = publisher.getBean(RdmaEndpoint.class).localAddress();
            RdmaTemplate template = reader.getBean(RdmaTemplate.class);
            selection = template.transport().selection().toString();
            System.out.println("[spring-demo] reader app: provider " + selection);
            long start = System.nanoTime();
            MemorySegment copy = template.read(peer, "demo-dataset", arena);
            seconds = (System.nanoTime() - start) / 1e9;
            MemorySegment expected = arena.allocate(SIZE, 64);
            fill(expected);
            boolean identical = copy.mismatch(expected) == -1;
            System.out.printf("[spring-demo] reader app: RdmaTemplate.read(%s, \"demo-dataset\") took %.3f s (%.0f MiB/s), bytes identical: %s%n",
                    peer, seconds, (SIZE >> 20) / seconds, identical);
            if (!identical) {
                throw new IllegalStateException("the region read differs from what the publisher published");
            }
            report(selection, (SIZE >> 20) + " MiB region via RdmaTemplate",
                    "verbs".equals(template.transport().provider()) ? "RDMA READ" : "emulated READ (" + template.transport().provider() + ")",
                    "OK, bytes identical");
        }
        System.out.println("[spring-demo] publisher app: GET /actuator/health/rdma4j -> " + httpGet("http://127.0.0.1:8080/actuator/health/rdma4j"));
        if (java.util.Arrays.asList(args).contains("--exit")) {
            publisher.close();
            System.out.println("[spring-demo] OK");
        } else {
            System.out.println("[spring-demo] publisher app running (Ctrl-C to stop):");
            System.out.println("  curl http://127.0.0.1:8080/actuator/health/rdma4j");
            System.out.println("  curl http://127.0.0.1:8080/actuator/info");
            System.out.println("  curl http://127.0.0.1:8080/actuator/metrics/rdma4j.operations");
            System.out.println("  curl http://127.0.0.1:8080/actuator/metrics/rdma4j.served.bytes");
        }
    }

    /** This demo's row of the table that {@code -Pdemo} ends with (samples/demo-summary), when run there. */
    static void report(String... columns) throws java.io.IOException {
        String file = System.getProperty("demo.result");
        if (file != null) {
            Files.writeString(Path.of(file), "spring-demo\t" + String.join("\t", columns));
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
