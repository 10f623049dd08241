package io.rdma4j.spring.boot;

import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.MicrometerMetrics;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.spring.boot.autoconfigure.RdmaActuatorAutoConfiguration;
import io.rdma4j.spring.boot.autoconfigure.RdmaAutoConfiguration;
import io.rdma4j.spring.boot.autoconfigure.RdmaInfoContributor;
import io.rdma4j.spring.boot.autoconfigure.RdmaKafkaAutoConfiguration;
import io.rdma4j.spring.boot.kafka.RdmaKafkaConsumerFactoryPostProcessor;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RdmaAutoConfigurationTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(RdmaAutoConfiguration.class, RdmaActuatorAutoConfiguration.class,
                    RdmaKafkaAutoConfiguration.class));

    @Test
    void definesTransportPoolTemplateAndObservabilityByDefault() {
        runner.run(context -> {
            assertThat(context).hasNotFailed();
            RdmaTransport transport = context.getBean(RdmaTransport.class);
            // This machine has no RDMA device: auto-detection falls back to the software provider.
            assertThat(transport.provider()).isEqualTo("tcp");
            assertThat(transport.selection().reason()).startsWith("auto");
            assertThat(context).hasSingleBean(RegisteredBufferPool.class).hasSingleBean(RdmaTemplate.class)
                    .hasSingleBean(RdmaRegionPublisher.class).hasSingleBean(MicrometerMetrics.class)
                    .hasSingleBean(RdmaInfoContributor.class)
                    .hasBean(RdmaActuatorAutoConfiguration.HEALTH_INDICATOR_BEAN)
                    .doesNotHaveBean(RdmaEndpoint.class);
        });
    }

    @Test
    void disabledDefinesNoRdma4jBeanAtAll() {
        runner.withPropertyValues("rdma4j.enabled=false").run(context -> {
            assertThat(context).hasNotFailed().doesNotHaveBean(RdmaTransport.class);
            String[] rdmaBeans = Arrays.stream(context.getBeanDefinitionNames())
                    .filter(name -> {
                        Class<?> type = context.getType(name);
                        return type != null && type.getName().startsWith("io.rdma4j.");
                    })
                    .toArray(String[]::new);
            assertThat(rdmaBeans).isEmpty();
        });
    }

    @Test
    void mapsEveryTransportProperty() {
        runner.withPropertyValues("rdma4j.provider=tcp", "rdma4j.device=mlx5_1", "rdma4j.port=2", "rdma4j.gid-index=3",
                        "rdma4j.interface=eth7", "rdma4j.address=10.0.0.7", "rdma4j.connect-timeout=3s",
                        "rdma4j.operation-timeout=45s", "rdma4j.max-outstanding-operations=17",
                        "rdma4j.max-message-size=4096", "rdma4j.shared-secret=s3cret", "rdma4j.options.tcp.chunk-size=131072")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    TransportConfig config = context.getBean(RdmaTransport.class).config();
                    assertThat(config.provider()).isEqualTo("tcp");
                    assertThat(config.device()).isEqualTo("mlx5_1");
                    assertThat(config.port()).isEqualTo(2);
                    assertThat(config.gidIndex()).isEqualTo(3);
                    assertThat(config.networkInterface()).isEqualTo("eth7");
                    assertThat(config.localAddress()).isEqualTo("10.0.0.7");
                    assertThat(config.connectTimeout()).isEqualTo(Duration.ofSeconds(3));
                    assertThat(config.operationTimeout()).isEqualTo(Duration.ofSeconds(45));
                    assertThat(config.maxOutstandingOperations()).isEqualTo(17);
                    assertThat(config.maxMessageSize()).isEqualTo(4096);
                    assertThat(config.sharedSecret()).isEqualTo("s3cret");
                    assertThat(config.providerOptions()).isEqualTo(Map.of("tcp.chunk-size", "131072"));
                    // Explicitly chosen tcp is not a fallback.
                    assertThat(RdmaStatus.of(context.getBean(RdmaTransport.class), null, null).details())
                            .containsEntry("fallback", false);
                });
    }

    @Test
    void mapsPoolProperties() {
        runner.withPropertyValues("rdma4j.pool.slab-size=1048576", "rdma4j.pool.min-buffer-size=1024",
                "rdma4j.pool.max-pooled-bytes=8388608", "rdma4j.pool.max-cached-large-bytes=2097152").run(context -> {
            var config = context.getBean(RegisteredBufferPool.class).config();
            assertThat(config.slabSize()).isEqualTo(1 << 20);
            assertThat(config.minBufferSize()).isEqualTo(1024);
            assertThat(config.maxPooledBytes()).isEqualTo(8 << 20);
            assertThat(config.maxCachedLargeBytes()).isEqualTo(2 << 20);
            try (var buffer = context.getBean(RegisteredBufferPool.class).acquire(3000)) {
                assertThat(buffer.segment().byteSize()).isEqualTo(3000);
            }
        });
    }

    @Test
    void unqualifiedProviderOptionIsRejectedWithAdvice() {
        runner.withPropertyValues("rdma4j.options.chunk-size=1").run(context -> assertThat(context).getFailure()
                .rootCause().hasMessageContaining("rdma4j.options.tcp.chunk-size"));
    }

    @Test
    void endpointListensWhenEnabled() {
        runner.withPropertyValues("rdma4j.endpoint.enabled=true", "rdma4j.endpoint.port=0").run(context -> {
            RdmaEndpoint endpoint = context.getBean(RdmaEndpoint.class);
            assertThat(endpoint.isRunning()).isTrue();
            assertThat(endpoint.localAddress().getPort()).isPositive();
            assertThat(endpoint.localAddress().getAddress().isLoopbackAddress()).isTrue();
        });
    }

    @Test
    void applicationBeansWin() {
        runner.withUserConfiguration(OwnBeans.class).run(context -> {
            assertThat(context).hasSingleBean(RdmaTransport.class).hasSingleBean(RdmaTemplate.class);
            assertThat(context.getBean(RdmaTransport.class)).isSameAs(context.getBean("ownTransport"));
            assertThat(context.getBean(RdmaTemplate.class)).isSameAs(context.getBean("ownTemplate"));
            assertThat(context.getBean(RdmaTransport.class).config().maxMessageSize()).isEqualTo(999);
        });
    }

    @Test
    void failFastStopsStartupWithTheProviderError() {
        runner.withPropertyValues("rdma4j.provider=nosuch").run(context -> assertThat(context).getFailure()
                .rootCause().hasMessageContaining("unknown rdma4j provider 'nosuch'"));
    }

    @Test
    void withoutFailFastTheApplicationStartsAndHealthIsDown() {
        runner.withPropertyValues("rdma4j.provider=nosuch", "rdma4j.fail-fast=false", "rdma4j.endpoint.enabled=true").run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(RdmaTransport.class)).isInstanceOf(UnavailableRdmaTransport.class);
            assertThat(context.getBean(RdmaEndpoint.class).isRunning()).isFalse();
            RdmaStatus status = RdmaStatus.of(context.getBean(RdmaTransport.class), null, null);
            assertThat(status.up()).isFalse();
            assertThat(status.details()).containsEntry("provider", "none");
            assertThat((String) status.details().get("error")).contains("nosuch");
            // The pool bean exists without a transport; lending a buffer says why it cannot.
            assertThatThrownBy(() -> context.getBean(RegisteredBufferPool.class).acquire(4096))
                    .isInstanceOf(ProviderUnavailableException.class).hasMessageContaining("nosuch");
        });
    }

    @Test
    void healthAndInfoCanBeSwitchedOff() {
        runner.withPropertyValues("management.health.rdma4j.enabled=false", "management.info.rdma4j.enabled=false").run(context -> {
            assertThat(context).hasSingleBean(RdmaTransport.class)
                    .doesNotHaveBean(RdmaActuatorAutoConfiguration.HEALTH_INDICATOR_BEAN)
                    .doesNotHaveBean(RdmaInfoContributor.class);
        });
    }

    @Test
    void kafkaWiringIsInactiveWithoutTheKafkaModule() {
        // The Kafka module is on this test class path (for RdmaKafkaListenerTest): hide it as an application without it.
        runner.withClassLoader(new org.springframework.boot.test.context.FilteredClassLoader("io.rdma4j.kafka."))
                .withPropertyValues("spring.kafka.consumer.properties.rdma.fetch.enabled=true")
                .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(RdmaKafkaConsumerFactoryPostProcessor.class));
    }

    @Test
    void annotatedMethodsArePublished() {
        runner.withUserConfiguration(Regions.class).run(context -> {
            RdmaTemplate template = context.getBean(RdmaTemplate.class);
            assertThat(template.publishedNames()).containsExactly("buffer", "segment");
            assertThat(template.published("segment").orElseThrow().byteSize()).isEqualTo(4096);
            assertThat(template.published("buffer").orElseThrow().byteSize()).isEqualTo(100);
            assertThat(context.getBean(RdmaTransport.class).registeredRegions()).isEqualTo(2);
        });
    }

    @Test
    void heapBufferRegionFailsStartupWithAdvice() {
        runner.withUserConfiguration(HeapRegion.class).run(context -> assertThat(context).getFailure()
                .rootCause().hasMessageContaining("only a direct ByteBuffer can be published"));
    }

    @Test
    void confinedMemoryIsRefusedWithAdvice() {
        runner.run(context -> {
            RdmaTemplate template = context.getBean(RdmaTemplate.class);
            try (Arena confined = Arena.ofConfined()) {
                org.assertj.core.api.Assertions.assertThatThrownBy(() -> template.publish("confined", confined.allocate(64)))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("Arena.ofShared()");
            }
            assertThat(template.publishedNames()).isEmpty();
        });
    }

    @Configuration(proxyBeanMethods = false)
    static class OwnBeans {
        @Bean(destroyMethod = "close")
        RdmaTransport ownTransport() {
            return RdmaTransport.open(TransportConfig.builder().provider("tcp").maxMessageSize(999).build());
        }

        @Bean(destroyMethod = "close")
        RdmaTemplate ownTemplate(RdmaTransport transport) {
            return new RdmaTemplate(transport);
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class Regions {
        @Bean(destroyMethod = "close")
        Arena regionMemory() {
            return Arena.ofShared();
        }

        @Bean
        RegionSource regionSource(Arena regionMemory) {
            return new RegionSource(regionMemory);
        }
    }

    static class RegionSource {
        private final Arena arena;

        RegionSource(Arena arena) {
            this.arena = arena;
        }

        @RdmaRegion("segment")
        MemorySegment segment() {
            return arena.allocate(4096);
        }

        @RdmaRegion("buffer")
        ByteBuffer buffer() {
            return ByteBuffer.allocateDirect(100);
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class HeapRegion {
        @Bean
        HeapSource heapSource() {
            return new HeapSource();
        }
    }

    static class HeapSource {
        @RdmaRegion("heap")
        ByteBuffer heap() {
            return ByteBuffer.allocate(10);
        }
    }
}
