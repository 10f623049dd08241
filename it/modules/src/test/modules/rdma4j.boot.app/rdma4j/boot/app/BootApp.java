package rdma4j.boot.app;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.spring.boot.RdmaEndpoint;
import io.rdma4j.spring.boot.RdmaRegion;
import io.rdma4j.spring.boot.RdmaTemplate;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The starter's auto-configuration on the module path: it opens a tcp transport, publishes the "prices" region through
 * its endpoint, reads it back through RdmaTemplate and reports health through rdma4jHealthIndicator.
 */
@Configuration(proxyBeanMethods = false)
@EnableAutoConfiguration
public class BootApp {

    static final int SIZE = 1 << 16;

    @RdmaRegion("prices")
    MemorySegment prices(Arena arena) {
        return arena.allocate(SIZE).fill((byte) 0x5A);
    }

    public static void main(String[] args) {
        try (ConfigurableApplicationContext app = new SpringApplicationBuilder(BootApp.class)
                .web(WebApplicationType.NONE).logStartupInfo(false)
                .run("--rdma4j.provider=tcp", "--rdma4j.endpoint.enabled=true", "--rdma4j.endpoint.port=0",
                        "--spring.main.banner-mode=off");
             Arena arena = Arena.ofShared()) {
            RdmaEndpoint endpoint = app.getBean(RdmaEndpoint.class);
            MemorySegment sink = arena.allocate(SIZE);
            long read = app.getBean(RdmaTemplate.class).read(endpoint.localAddress(), "prices", sink);
            System.out.println("READ " + read + " bytes over " + app.getBean(RdmaTransport.class).selection().provider()
                    + ", byte 12345 is " + sink.get(ValueLayout.JAVA_BYTE, 12345));
            System.out.println("HEALTH " + app.getBean("rdma4jHealthIndicator", HealthIndicator.class).health().getStatus());
        }
    }
}
