package io.rdma4j.spring.boot;

import io.rdma4j.core.RdmaTransport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Two real Spring Boot applications in one JVM on loopback: one publishes, the other reads through RdmaTemplate. */
class TwoApplicationsTest {

    static final long LARGE = 64L << 20;

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class Publisher {
        @Bean(destroyMethod = "close")
        Arena publishedMemory() {
            return Arena.ofShared();
        }

        @Bean
        Datasets datasets(Arena publishedMemory) {
            return new Datasets(publishedMemory);
        }
    }

    static class Datasets {
        private final Arena arena;
        static Path file;

        Datasets(Arena arena) {
            this.arena = arena;
        }

        @RdmaRegion("large")
        MemorySegment large() {
            MemorySegment segment = arena.allocate(LARGE, 64);
            fill(segment, 7);
            return segment;
        }

        @RdmaRegion("file")
        Path file() {
            return file;
        }
    }

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class Reader {
    }

    static void fill(MemorySegment segment, long seed) {
        for (long i = 0; i < segment.byteSize() / 8; i++) {
            segment.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L + seed);
        }
    }

    static ConfigurableApplicationContext start(Class<?> app, String... properties) {
        SpringApplication application = new SpringApplication(app);
        application.setWebApplicationType(WebApplicationType.NONE);
        return application.run(properties);
    }

    @Test
    void readsALargeRegionAndAFileAcrossApplications(@TempDir Path dir) throws Exception {
        Path source = dir.resolve("published.bin");
        try (Arena arena = Arena.ofConfined(); FileChannel ch = FileChannel.open(source, StandardOpenOption.CREATE_NEW,
                StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MemorySegment content = ch.map(FileChannel.MapMode.READ_WRITE, 0, 3_000_003, arena);
            fill(content.asSlice(0, 3_000_000), 11);
            content.set(ValueLayout.JAVA_BYTE, 3_000_002, (byte) 42);
        }
        Datasets.file = source;

        ConfigurableApplicationContext publisher = start(Publisher.class, "--rdma4j.endpoint.enabled=true", "--rdma4j.endpoint.port=0");
        RdmaTransport publisherTransport = publisher.getBean(RdmaTransport.class);
        try (ConfigurableApplicationContext reader = start(Reader.class)) {
            InetSocketAddress peer = publisher.getBean(RdmaEndpoint.class).localAddress();
            RdmaTemplate template = reader.getBean(RdmaTemplate.class);

            try (Arena arena = Arena.ofShared()) {
                MemorySegment copy = template.read(peer, "large", arena);
                assertThat(copy.byteSize()).isEqualTo(LARGE);
                MemorySegment expected = arena.allocate(LARGE, 64);
                fill(expected, 7);
                assertThat(copy.mismatch(expected)).isEqualTo(-1L);
            }

            Path target = dir.resolve("copy.bin");
            assertThat(template.readToFile(peer, "file", target)).isEqualTo(3_000_003);
            assertThat(Files.mismatch(source, target)).isEqualTo(-1L);

            assertThatThrownBy(() -> template.lookup(peer, "missing"))
                    .isInstanceOf(RegionNotFoundException.class)
                    .hasMessageContaining("no region named 'missing'").hasMessageContaining("[file, large]");

            // Orderly shutdown: endpoint stops, regions are deregistered, the transport closes.
            PublishedRegion large = publisher.getBean(RdmaTemplate.class).published("large").orElseThrow();
            publisher.close();
            assertThat(large.isOpen()).isFalse();
            assertThat(publisherTransport.registeredRegions()).isZero();
            assertThatThrownBy(() -> template.lookup(peer, "large")).isInstanceOf(RuntimeException.class);
        } finally {
            publisher.close();
        }
    }
}
