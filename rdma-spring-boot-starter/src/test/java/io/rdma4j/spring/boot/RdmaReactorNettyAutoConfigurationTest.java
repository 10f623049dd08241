package io.rdma4j.spring.boot;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.netty.RdmaSocketChannel;
import io.rdma4j.netty.reactor.RdmaLoopResources;
import io.rdma4j.spring.boot.autoconfigure.RdmaAutoConfiguration;
import io.rdma4j.spring.boot.autoconfigure.RdmaReactorNettyAutoConfiguration;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.http.client.ReactorResourceFactory;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;

import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import static org.assertj.core.api.Assertions.assertThat;

/** The Reactor Netty wiring: on only when asked, stepping aside for the application's beans, and serving for real. */
class RdmaReactorNettyAutoConfigurationTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(RdmaAutoConfiguration.class, RdmaReactorNettyAutoConfiguration.class))
            .withPropertyValues("rdma4j.provider=tcp");

    @Test
    void offUnlessEnabled() {
        runner.run(context -> {
            assertThat(context).hasSingleBean(RdmaTransport.class);
            assertThat(context).doesNotHaveBean(RdmaLoopResources.class);
            assertThat(context).doesNotHaveBean(ReactorResourceFactory.class);
        });
        runner.withPropertyValues("rdma4j.enabled=false", "rdma4j.netty.enabled=true").run(context -> {
            assertThat(context).doesNotHaveBean(RdmaTransport.class);
            assertThat(context).doesNotHaveBean(RdmaLoopResources.class);
        });
    }

    @Test
    void reactorNettysResourcesAreTheTransportsLoops() {
        runner.withPropertyValues("rdma4j.netty.enabled=true", "rdma4j.netty.event-loop-threads=1").run(context -> {
            RdmaLoopResources loops = context.getBean(RdmaLoopResources.class);
            ReactorResourceFactory factory = context.getBean(ReactorResourceFactory.class);
            factory.afterPropertiesSet();
            assertThat(factory.getLoopResources()).isSameAs(loops);
            assertThat(factory.isUseGlobalResources()).isFalse();
        });
    }

    @Test
    void theApplicationsOwnBeansWin() {
        runner.withPropertyValues("rdma4j.netty.enabled=true")
                .withBean("reactorResourceFactory", ReactorResourceFactory.class, ReactorResourceFactory::new)
                .run(context -> {
                    assertThat(context).hasSingleBean(ReactorResourceFactory.class);
                    assertThat(context.getBean(ReactorResourceFactory.class).getLoopResources())
                            .isNotInstanceOf(RdmaLoopResources.class);
                });
    }

    @Test
    void aServerAndClientOnTheFactorysLoopsTalkThroughRdma4j() {
        runner.withPropertyValues("rdma4j.netty.enabled=true", "rdma4j.netty.event-loop-threads=1").run(context -> {
            ReactorResourceFactory factory = context.getBean(ReactorResourceFactory.class);
            factory.afterPropertiesSet();
            Set<Class<?>> channels = ConcurrentHashMap.newKeySet();
            DisposableServer server = HttpServer.create().host("127.0.0.1").port(0).runOn(factory.getLoopResources())
                    .doOnConnection(c -> channels.add(c.channel().getClass()))
                    .handle((request, response) -> response.sendString(Mono.just("served by " + request.method())))
                    .bindNow();
            try {
                String body = HttpClient.create().runOn(factory.getLoopResources())
                        .resolver(io.netty.resolver.DefaultAddressResolverGroup.INSTANCE)
                        .get().uri("http://127.0.0.1:" + server.port() + "/").responseContent().aggregate().asString()
                        .block(Duration.ofSeconds(30));
                assertThat(body).isEqualTo("served by GET");
                assertThat(channels).containsOnly(RdmaSocketChannel.class);
                assertThat(context.getBean(RdmaTransport.class).metrics().openConnections()).isPositive();
            } finally {
                server.disposeNow();
            }
        });
    }

    /**
     * A client on the transport's loops calling a server that does not run rdma4j reaches it over plain TCP. This HTTP
     * server neither answers rdma4j's hello nor closes on it, so the first connection waits out rdma4j's connect
     * timeout (shortened here) before it falls back.
     */
    @Test
    void aClientOnTheFactorysLoopsCallsAPlainHttpServer() {
        runner.withPropertyValues("rdma4j.netty.enabled=true", "rdma4j.netty.event-loop-threads=1",
                "rdma4j.connect-timeout=1s").run(context -> {
            ReactorResourceFactory factory = context.getBean(ReactorResourceFactory.class);
            factory.afterPropertiesSet();
            DisposableServer plain = HttpServer.create().host("127.0.0.1").port(0) // Reactor Netty's own NIO loops
                    .handle((request, response) -> response.sendString(Mono.just("plain"))).bindNow();
            try {
                String body = HttpClient.create().runOn(factory.getLoopResources())
                        .resolver(io.netty.resolver.DefaultAddressResolverGroup.INSTANCE)
                        .get().uri("http://127.0.0.1:" + plain.port() + "/").responseContent().aggregate().asString()
                        .block(Duration.ofSeconds(30));
                assertThat(body).isEqualTo("plain");
            } finally {
                plain.disposeNow();
            }
        });
    }

    @Test
    void webClientsConnectorTakesTheLoopsAndTheJdkResolver() {
        boolean boot4 = org.springframework.util.ClassUtils.isPresent(
                "org.springframework.boot.http.client.autoconfigure.reactive.ClientHttpConnectorBuilderCustomizer", null);
        runner.withPropertyValues("rdma4j.netty.enabled=true", "rdma4j.netty.event-loop-threads=1").run(context -> {
            if (!boot4) {
                // Boot 3.5 builds WebClient's connector from the ReactorResourceFactory alone
                assertThat(context).doesNotHaveBean("rdmaClientHttpConnectorBuilderCustomizer");
                return;
            }
            ReactorResourceFactory factory = context.getBean(ReactorResourceFactory.class);
            factory.afterPropertiesSet();
            DisposableServer server = HttpServer.create().host("127.0.0.1").port(0).runOn(factory.getLoopResources())
                    .handle((request, response) -> response.sendString(Mono.just("connector"))).bindNow();
            try {
                assertThat(Boot4Connector.get(context.getBean("rdmaClientHttpConnectorBuilderCustomizer"),
                        "http://127.0.0.1:" + server.port() + "/")).isEqualTo("connector");
            } finally {
                server.disposeNow();
            }
        });
    }

    /** Boot 4's connector builder, loaded only where it exists. */
    private static final class Boot4Connector {
        @SuppressWarnings("unchecked")
        static String get(Object customizer, String uri) {
            var builder = ((org.springframework.boot.http.client.autoconfigure.reactive.ClientHttpConnectorBuilderCustomizer<
                    org.springframework.boot.http.client.reactive.ReactorClientHttpConnectorBuilder>) customizer)
                    .customize(org.springframework.boot.http.client.reactive.ClientHttpConnectorBuilder.reactor());
            var connector = builder.build();
            return connector.connect(org.springframework.http.HttpMethod.GET, java.net.URI.create(uri),
                            request -> request.setComplete())
                    .flatMap(response -> org.springframework.core.io.buffer.DataBufferUtils.join(response.getBody()))
                    .map(buffer -> {
                        String text = buffer.toString(java.nio.charset.StandardCharsets.UTF_8);
                        org.springframework.core.io.buffer.DataBufferUtils.release(buffer);
                        return text;
                    })
                    .block(Duration.ofSeconds(30));
        }
    }
}
