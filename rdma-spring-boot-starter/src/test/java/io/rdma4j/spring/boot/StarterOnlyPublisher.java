package io.rdma4j.spring.boot;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/**
 * An application with the starter and no web server that publishes one region. As a program (run by
 * {@link RdmaEndpointLifecycleTest} in its own JVM) it prints its endpoint port, returns from main, and
 * closes its context when it reads {@value #CLOSE} on standard input.
 */
@SpringBootConfiguration
@EnableAutoConfiguration
public class StarterOnlyPublisher {

    static final String READY = "rdma4j endpoint port=";
    static final String CLOSE = "close";
    static final String REGION = "alive";
    static final String CONTENT = "served while main has returned";

    @RdmaRegion(REGION)
    MemorySegment alive(Arena arena) {
        return arena.allocateFrom(CONTENT);
    }

    public static void main(String[] args) {
        SpringApplication application = new SpringApplication(StarterOnlyPublisher.class);
        application.setWebApplicationType(WebApplicationType.NONE);
        ConfigurableApplicationContext context = application.run("--rdma4j.endpoint.enabled=true", "--spring.main.banner-mode=off");
        Thread.ofPlatform().daemon().name("close-on-input").start(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                    if (line.equals(CLOSE)) {
                        break;
                    }
                }
            } catch (java.io.IOException e) {
                // stdin gone: the parent is gone, close as well
            }
            context.close();
        });
        System.out.println(READY + context.getBean(RdmaEndpoint.class).localAddress().getPort());
        System.out.flush();
    }
}
