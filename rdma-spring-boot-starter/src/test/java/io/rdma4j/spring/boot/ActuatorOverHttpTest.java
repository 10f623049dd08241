package io.rdma4j.spring.boot;

import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.json.JsonParserFactory;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.assertj.core.api.Assertions.assertThat;

/** A running web application: health, info and metrics of the transport read over HTTP. */
class ActuatorOverHttpTest {

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class WebApp {
        @Bean(destroyMethod = "close")
        Arena memory() {
            return Arena.ofShared();
        }

        @Bean
        Source source(Arena memory) {
            return new Source(memory);
        }
    }

    static class Source {
        private final Arena arena;

        Source(Arena arena) {
            this.arena = arena;
        }

        @RdmaRegion("greeting")
        MemorySegment greeting() {
            return arena.allocateFrom("hello over rdma4j");
        }
    }

    @Test
    void healthInfoAndMetricsOverHttp() throws Exception {
        try (ConfigurableApplicationContext app = new SpringApplication(WebApp.class).run(
                "--server.port=0", "--server.address=127.0.0.1", "--rdma4j.endpoint.enabled=true",
                "--management.endpoints.web.exposure.include=health,info,metrics",
                "--management.endpoint.health.show-details=always");
             HttpClient http = HttpClient.newHttpClient()) {
            int port = Integer.parseInt(app.getEnvironment().getProperty("local.server.port"));
            // Produce some traffic so the operation counters move.
            InetSocketAddress endpoint = app.getBean(RdmaEndpoint.class).localAddress();
            try (Arena arena = Arena.ofShared()) {
                MemorySegment copy = app.getBean(RdmaTemplate.class).read(endpoint, "greeting", arena);
                assertThat(copy.getString(0)).isEqualTo("hello over rdma4j");
            }

            HttpResponse<String> health = get(http, port, "/actuator/health/rdma4j");
            assertThat(health.statusCode()).isEqualTo(200);
            assertThat(health.body()).contains("\"status\":\"UP\"", "\"provider\":\"tcp\"", "\"fallback\":true",
                    "\"reason\":\"auto", "\"publishedRegions\":[\"greeting\"]");

            HttpResponse<String> info = get(http, port, "/actuator/info");
            assertThat(info.statusCode()).isEqualTo(200);
            assertThat(info.body()).contains("\"rdma4j\"", "\"provider\":\"tcp\"", "\"endpoint\":\"127.0.0.1:" + endpoint.getPort());

            HttpResponse<String> operations = get(http, port, "/actuator/metrics/rdma4j.operations?tag=operation:read&tag=outcome:success");
            assertThat(operations.statusCode()).isEqualTo(200);
            assertThat(operations.body()).contains("\"name\":\"rdma4j.operations\"", "\"provider\"");
            assertThat(operations.body()).doesNotContain("\"value\":0.0");

            HttpResponse<String> regions = get(http, port, "/actuator/metrics/rdma4j.regions.registered");
            assertThat(regions.statusCode()).isEqualTo(200);
        }
    }

    /** fail-fast=false means the application is meant to run without RDMA: its overall health stays UP. */
    @Test
    void withoutFailFastAMissingTransportLeavesTheApplicationUp() throws Exception {
        try (ConfigurableApplicationContext app = new SpringApplication(WebApp.class).run(
                "--server.port=0", "--server.address=127.0.0.1", "--rdma4j.provider=nosuch", "--rdma4j.fail-fast=false",
                "--rdma4j.endpoint.enabled=true", "--management.endpoint.health.show-details=always",
                "--management.endpoint.health.show-components=always");
             HttpClient http = HttpClient.newHttpClient()) {
            int port = Integer.parseInt(app.getEnvironment().getProperty("local.server.port"));
            HttpResponse<String> overall = get(http, port, "/actuator/health");
            assertThat(overall.statusCode()).isEqualTo(200);
            assertThat(JsonParserFactory.getJsonParser().parseMap(overall.body())).containsEntry("status", "UP");
            assertThat(overall.body()).contains("\"rdma4j\":{", "\"status\":\"UNKNOWN\"", "unknown rdma4j provider 'nosuch'",
                            "\"mode\":\"" + RdmaStatus.WITHOUT_RDMA_MODE + "\"");
        }
    }

    private static HttpResponse<String> get(HttpClient http, int port, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).build(),
                HttpResponse.BodyHandlers.ofString());
    }
}
