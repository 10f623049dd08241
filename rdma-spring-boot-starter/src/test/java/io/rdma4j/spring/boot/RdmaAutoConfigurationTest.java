package io.rdma4j.spring.boot;

import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.metrics.MicrometerMetrics;
import io.rdma4j.core.pool.PoolConfig;
import io.rdma4j.core.pool.RegisteredBufferPool;
import io.rdma4j.spring.boot.autoconfigure.RdmaActuatorAutoConfiguration;
import io.rdma4j.spring.boot.autoconfigure.RdmaAutoConfiguration;
import io.rdma4j.spring.boot.autoconfigure.RdmaInfoContributor;
import io.rdma4j.spring.boot.autoconfigure.RdmaKafkaAutoConfiguration;
import io.rdma4j.spring.boot.kafka.RdmaKafkaConsumerFactoryPostProcessor;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.json.JsonParserFactory;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.util.unit.DataSize;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
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
                        "rdma4j.max-message-size=4096", "rdma4j.shared-secret=s3cret-of-16-bytes+", "rdma4j.options.tcp.chunk-size=131072")
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
                    assertThat(config.sharedSecret()).isEqualTo("s3cret-of-16-bytes+");
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
    void sizesAndDurationsBindWithUnits() {
        runner.withPropertyValues("rdma4j.pool.slab-size=4MB", "rdma4j.pool.min-buffer-size=8KB",
                "rdma4j.pool.max-pooled-bytes=64MB", "rdma4j.pool.max-cached-large-bytes=16MB",
                "rdma4j.max-message-size=1MB", "rdma4j.operation-timeout=30s", "rdma4j.connect-timeout=500ms").run(context -> {
            assertThat(context).hasNotFailed();
            var pool = context.getBean(RegisteredBufferPool.class).config();
            assertThat(pool.slabSize()).isEqualTo(4L << 20);
            assertThat(pool.minBufferSize()).isEqualTo(8L << 10);
            assertThat(pool.maxPooledBytes()).isEqualTo(64L << 20);
            assertThat(pool.maxCachedLargeBytes()).isEqualTo(16L << 20);
            TransportConfig config = context.getBean(RdmaTransport.class).config();
            assertThat(config.maxMessageSize()).isEqualTo(1 << 20);
            assertThat(config.operationTimeout()).isEqualTo(Duration.ofSeconds(30));
            assertThat(config.connectTimeout()).isEqualTo(Duration.ofMillis(500));
        });
    }

    @Test
    void defaultSizesAreRdmaCoresDefaults() {
        runner.run(context -> {
            assertThat(context.getBean(RegisteredBufferPool.class).config()).isEqualTo(PoolConfig.defaults());
            assertThat(context.getBean(RdmaTransport.class).config().maxMessageSize())
                    .isEqualTo(TransportConfig.builder().build().maxMessageSize());
        });
    }

    @Test
    void maxMessageSizeBeyondAnIntIsRejectedWithAdvice() {
        runner.withPropertyValues("rdma4j.max-message-size=3GB").run(context -> assertThat(context).getFailure()
                .rootCause().hasMessageContaining("rdma4j.max-message-size").hasMessageContaining("use at most"));
    }

    @Test
    void sizeWithoutAUnitThatBootCannotReadFailsBinding() {
        runner.withPropertyValues("rdma4j.pool.slab-size=4 apples").run(context -> assertThat(context).getFailure()
                .hasStackTraceContaining("rdma4j.pool.slab-size").hasStackTraceContaining("DataSize"));
    }

    @Test
    void configurationMetadataDescribesSizesAndDurations() throws Exception {
        String json;
        try (var in = RdmaProperties.class.getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertThat(in).as("the configuration processor's output").isNotNull();
            json = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        }
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> properties = (List<Map<String, Object>>) JsonParserFactory.getJsonParser().parseMap(json).get("properties");
        Map<String, Map<String, Object>> byName = new java.util.HashMap<>();
        properties.forEach(p -> byName.put((String) p.get("name"), p));
        PoolConfig defaults = PoolConfig.defaults();
        Map<String, Long> sizes = Map.of("rdma4j.pool.slab-size", defaults.slabSize(),
                "rdma4j.pool.min-buffer-size", defaults.minBufferSize(),
                "rdma4j.pool.max-pooled-bytes", defaults.maxPooledBytes(),
                "rdma4j.pool.max-cached-large-bytes", defaults.maxCachedLargeBytes(),
                "rdma4j.max-message-size", (long) TransportConfig.builder().build().maxMessageSize());
        sizes.forEach((name, bytes) -> {
            assertThat(byName).containsKey(name);
            assertThat(byName.get(name)).containsEntry("type", "org.springframework.util.unit.DataSize");
            assertThat((String) byName.get(name).get("description")).isNotBlank();
            assertThat(DataSize.parse((String) byName.get(name).get("defaultValue")).toBytes()).as(name).isEqualTo(bytes);
        });
        for (String name : List.of("rdma4j.connect-timeout", "rdma4j.operation-timeout")) {
            assertThat(byName.get(name)).containsEntry("type", "java.time.Duration");
        }
        assertThat(byName.get("rdma4j.operation-timeout")).containsEntry("defaultValue", "30s");
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
    void anEndpointOnEveryInterfaceWithoutAuthenticationFailsTheStartNamingTheWaysOut() {
        runner.withPropertyValues("rdma4j.endpoint.enabled=true", "rdma4j.endpoint.address=0.0.0.0",
                "rdma4j.endpoint.port=0").run(context -> assertThat(context).getFailure().rootCause()
                .isInstanceOf(io.rdma4j.core.ProtectedModeException.class)
                .hasMessageContaining("rdma4j.shared-secret").hasMessageContaining("allow-unauthenticated=true"));
    }

    @Test
    void anEndpointOnEveryInterfaceListensWithASecretOrWhenUnauthenticatedPeersAreAllowed() {
        for (String choice : List.of("rdma4j.shared-secret=a secret of sixteen bytes or more",
                "rdma4j.allow-unauthenticated=true")) {
            runner.withPropertyValues("rdma4j.endpoint.enabled=true", "rdma4j.endpoint.address=0.0.0.0",
                    "rdma4j.endpoint.port=0", choice).run(context -> {
                assertThat(context).as(choice).hasNotFailed();
                assertThat(context.getBean(RdmaEndpoint.class).localAddress().getAddress().isAnyLocalAddress()).isTrue();
            });
        }
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
    void withoutFailFastTheApplicationRunsWithoutRdmaAndHealthIsUnknownWithTheReason() {
        runner.withPropertyValues("rdma4j.provider=nosuch", "rdma4j.fail-fast=false", "rdma4j.endpoint.enabled=true").run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(RdmaTransport.class)).isInstanceOf(UnavailableRdmaTransport.class);
            assertThat(context.getBean(RdmaEndpoint.class).isRunning()).isFalse();
            HealthOnEitherLine health = HealthOnEitherLine.of(context);
            assertThat(health.status()).isEqualTo("UNKNOWN");
            assertThat(health.details()).containsEntry("provider", "none")
                    .containsEntry("mode", RdmaStatus.WITHOUT_RDMA_MODE);
            assertThat((String) health.details().get("error")).contains("unknown rdma4j provider 'nosuch'");
            assertThat((String) health.details().get("reason")).startsWith("failed to open");
            // The pool bean exists without a transport; lending a buffer says why it cannot.
            assertThatThrownBy(() -> context.getBean(RegisteredBufferPool.class).acquire(4096))
                    .isInstanceOf(ProviderUnavailableException.class).hasMessageContaining("nosuch");
        });
    }

    @Test
    void withoutFailFastRegionMethodsAreNotCalledAndTheStartSucceeds() {
        ArenaRegions.arenas.clear();
        runner.withPropertyValues("rdma4j.provider=nosuch", "rdma4j.fail-fast=false").withUserConfiguration(ArenaRegions.class)
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    assertThat(context.getBean(RdmaTemplate.class).publishedNames()).isEmpty();
                    assertThat(ArenaRegions.arenas).isEmpty();
                });
    }

    @Test
    void anEndpointThatCannotListenFailsTheStartByDefault() throws Exception {
        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            runner.withPropertyValues("rdma4j.endpoint.enabled=true", "rdma4j.endpoint.port=" + taken.getLocalPort())
                    .run(context -> assertThat(context).getFailure().hasStackTraceContaining(String.valueOf(taken.getLocalPort())));
        }
    }

    @Test
    void withoutFailFastAnEndpointThatCannotListenIsDown() throws Exception {
        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            runner.withPropertyValues("rdma4j.endpoint.enabled=true", "rdma4j.endpoint.port=" + taken.getLocalPort(),
                    "rdma4j.fail-fast=false").run(context -> {
                assertThat(context).hasNotFailed();
                RdmaEndpoint endpoint = context.getBean(RdmaEndpoint.class);
                assertThat(endpoint.isRunning()).isFalse();
                assertThat(endpoint.failure()).isNotNull();
                HealthOnEitherLine health = HealthOnEitherLine.of(context);
                assertThat(health.status()).isEqualTo("DOWN");
                assertThat(health.details()).containsEntry("provider", "tcp").doesNotContainKey("endpoint");
                assertThat((String) health.details().get("error")).startsWith("endpoint failed to listen: ");
            });
        }
    }

    @Test
    void healthIsUpOnAnOpenTransport() {
        runner.run(context -> {
            HealthOnEitherLine health = HealthOnEitherLine.of(context);
            assertThat(health.status()).isEqualTo("UP");
            assertThat(health.details()).containsEntry("provider", "tcp").containsEntry("fallback", true)
                    .containsEntry("connections", 0L).containsEntry("bufferedBytes", 0L)
                    .containsEntry("messageBufferBytes", 0L).containsEntry("lentReceiveCredits", 0L).doesNotContainKey("error");
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
    void healthAndInfoFollowBootsDefaultsSwitches() {
        runner.withPropertyValues("management.health.defaults.enabled=false", "management.info.defaults.enabled=false").run(context -> {
            assertThat(context).hasSingleBean(RdmaTransport.class)
                    .doesNotHaveBean(RdmaActuatorAutoConfiguration.HEALTH_INDICATOR_BEAN)
                    .doesNotHaveBean(RdmaInfoContributor.class);
        });
        // The contributor's own switch wins over the defaults.
        runner.withPropertyValues("management.health.defaults.enabled=false", "management.health.rdma4j.enabled=true",
                "management.info.defaults.enabled=false", "management.info.rdma4j.enabled=true").run(context -> {
            assertThat(context).hasBean(RdmaActuatorAutoConfiguration.HEALTH_INDICATOR_BEAN)
                    .hasSingleBean(RdmaInfoContributor.class);
        });
    }

    @Test
    void kafkaWiringFollowsTheFetchProperty() {
        runner.withPropertyValues("spring.kafka.consumer.properties.rdma.fetch.enabled=true")
                .run(context -> assertThat(context).hasNotFailed().hasSingleBean(RdmaKafkaConsumerFactoryPostProcessor.class));
        runner.run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(RdmaKafkaConsumerFactoryPostProcessor.class));
        runner.withPropertyValues("spring.kafka.consumer.properties.rdma.fetch.enabled=true", "rdma4j.enabled=false")
                .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(RdmaKafkaConsumerFactoryPostProcessor.class));
    }

    @Test
    void kafkaWiringBacksOffForTheApplicationsOwn() {
        runner.withUserConfiguration(OwnKafkaWiring.class)
                .withPropertyValues("spring.kafka.consumer.properties.rdma.fetch.enabled=true")
                .run(context -> assertThat(context).hasNotFailed().hasSingleBean(RdmaKafkaConsumerFactoryPostProcessor.class)
                        .getBean(RdmaKafkaConsumerFactoryPostProcessor.class).isSameAs(OwnKafkaWiring.OWN));
    }

    @Configuration(proxyBeanMethods = false)
    static class OwnKafkaWiring {
        static final RdmaKafkaConsumerFactoryPostProcessor OWN = new RdmaKafkaConsumerFactoryPostProcessor();

        @Bean
        static RdmaKafkaConsumerFactoryPostProcessor ownKafkaWiring() {
            return OWN;
        }
    }

    @Test
    void kafkaWiringIsInactiveWithoutTheKafkaModule() {
        // The Kafka module (an optional dependency) is on this test class path: hide it as an application without it.
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

    @Test
    void confinedSinkIsRefusedBeforeThePeerIsAsked() {
        runner.run(context -> {
            RdmaTemplate template = context.getBean(RdmaTemplate.class);
            // Nothing listens there: a lookup would fail with a connection error, not with the advice.
            java.net.InetSocketAddress nobody = new java.net.InetSocketAddress("127.0.0.1", 1);
            try (Arena confined = Arena.ofConfined()) {
                org.assertj.core.api.Assertions.assertThatThrownBy(() -> template.read(nobody, "prices", confined.allocate(64)))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("confined to one thread")
                        .hasMessageContaining("Arena.ofShared(), Arena.ofAuto() or Arena.global()");
            }
        });
    }

    @Test
    void regionMethodMayTakeAnArenaThatTheRegionOwns() {
        ArenaRegions.arenas.clear();
        runner.withUserConfiguration(ArenaRegions.class).run(context -> {
            assertThat(context).hasNotFailed();
            RdmaTemplate template = context.getBean(RdmaTemplate.class);
            assertThat(template.publishedNames()).containsExactly("arena-buffer", "arena-segment");
            assertThat(template.published("arena-segment").orElseThrow().byteSize()).isEqualTo(8192);
            assertThat(template.published("arena-buffer").orElseThrow().byteSize()).isEqualTo(512);
            assertThat(ArenaRegions.arenas).hasSize(2).allSatisfy(arena -> assertThat(arena.scope().isAlive()).isTrue());
            // Unpublishing deregisters, then frees the region's arena.
            assertThat(template.unpublish("arena-buffer")).isTrue();
            assertThat(ArenaRegions.arenas).filteredOn(arena -> arena.scope().isAlive()).hasSize(1);
        });
        assertThat(ArenaRegions.arenas).hasSize(2).noneSatisfy(arena -> assertThat(arena.scope().isAlive()).isTrue());
    }

    @Test
    void arenaOfAFailedRegionIsClosedAndTheStartFails() {
        ArenaRegions.arenas.clear();
        runner.withUserConfiguration(FailingArenaRegion.class).run(context -> {
            assertThat(context).getFailure().hasMessageContaining("@RdmaRegion(\"heap\")")
                    .rootCause().hasMessageContaining("only a direct ByteBuffer can be published");
        });
        assertThat(ArenaRegions.arenas).hasSize(1);
        assertThat(ArenaRegions.arenas.getFirst().scope().isAlive()).isFalse();
    }

    @Test
    void otherParametersAndArenaWithPathAreRejectedWithAdvice() {
        runner.withUserConfiguration(WrongParameter.class).run(context -> assertThat(context).getFailure()
                .hasMessageContaining("must take no arguments or one java.lang.foreign.Arena"));
        runner.withUserConfiguration(ArenaForPath.class).run(context -> assertThat(context).getFailure()
                .hasMessageContaining("remove the Arena parameter"));
    }

    @Configuration(proxyBeanMethods = false)
    static class ArenaRegions {
        static final List<Arena> arenas = new java.util.concurrent.CopyOnWriteArrayList<>();

        @RdmaRegion("arena-segment")
        MemorySegment segment(Arena arena) {
            arenas.add(arena);
            return arena.allocate(8192);
        }

        @RdmaRegion("arena-buffer")
        ByteBuffer buffer(Arena arena) {
            arenas.add(arena);
            return arena.allocate(512).asByteBuffer();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class FailingArenaRegion {
        @RdmaRegion("heap")
        ByteBuffer heap(Arena arena) {
            ArenaRegions.arenas.add(arena);
            return ByteBuffer.allocate(10);
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class WrongParameter {
        @RdmaRegion("wrong")
        MemorySegment wrong(String size) {
            return MemorySegment.NULL;
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class ArenaForPath {
        @RdmaRegion("file")
        java.nio.file.Path file(Arena arena) {
            return java.nio.file.Path.of("/dev/null");
        }
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
