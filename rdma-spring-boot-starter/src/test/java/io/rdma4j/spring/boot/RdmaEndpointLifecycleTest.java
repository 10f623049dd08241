package io.rdma4j.spring.boot;

import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.util.ClassUtils;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** The endpoint as a server in the context's lifecycle: its phase, its order against the web server, and the JVM it keeps alive. */
class RdmaEndpointLifecycleTest {

    /** Boot's WebServerGracefulShutdownLifecycle moved package between 3.5 and 4.1; its phase did not. */
    static int webServerGracefulShutdownPhase() throws ReflectiveOperationException {
        String boot4 = "org.springframework.boot.web.server.context.WebServerGracefulShutdownLifecycle";
        String boot3 = "org.springframework.boot.web.context.WebServerGracefulShutdownLifecycle";
        ClassLoader loader = RdmaEndpointLifecycleTest.class.getClassLoader();
        Class<?> type = ClassUtils.forName(ClassUtils.isPresent(boot4, loader) ? boot4 : boot3, loader);
        return type.getField("SMART_LIFECYCLE_PHASE").getInt(null);
    }

    @Test
    void phaseIsJustBelowTheWebServersGracefulShutdown() throws ReflectiveOperationException {
        assertThat(RdmaEndpoint.PHASE).isEqualTo(webServerGracefulShutdownPhase() - 1);
    }

    /** Records whether the endpoint runs when the lifecycle processor starts and stops this probe. */
    static final class Probe implements SmartLifecycle {
        final int phase;
        final ApplicationContext context;
        final List<String> seen;
        volatile boolean running;

        /** Looks the endpoint up when called: a declared dependency would make Spring start it first and stop it last. */
        Probe(int phase, ApplicationContext context, List<String> seen) {
            this.phase = phase;
            this.context = context;
            this.seen = seen;
        }

        private boolean endpointRunning() {
            return context.getBean(RdmaEndpoint.class).isRunning();
        }

        @Override
        public void start() {
            running = true;
            seen.add("start@" + phase + " endpoint running=" + endpointRunning());
        }

        @Override
        public void stop() {
            running = false;
            seen.add("stop@" + phase + " endpoint running=" + endpointRunning());
        }

        @Override
        public boolean isRunning() {
            return running;
        }

        @Override
        public int getPhase() {
            return phase;
        }
    }

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class WithProbes {
        static final List<String> SEEN = java.util.Collections.synchronizedList(new ArrayList<>());

        @Bean
        Probe gracefulShutdownPhaseProbe(ApplicationContext context) throws ReflectiveOperationException {
            return new Probe(webServerGracefulShutdownPhase(), context, SEEN);
        }

        @Bean
        Probe belowEndpointPhaseProbe(ApplicationContext context) {
            return new Probe(RdmaEndpoint.PHASE - 1, context, SEEN);
        }
    }

    @Test
    void stopsAfterTheGracefulShutdownPhaseAndBeforeLowerPhases() throws ReflectiveOperationException {
        int graceful = webServerGracefulShutdownPhase();
        int below = RdmaEndpoint.PHASE - 1;
        WithProbes.SEEN.clear();
        SpringApplication app = new SpringApplication(WithProbes.class);
        app.setWebApplicationType(WebApplicationType.NONE);
        try (ConfigurableApplicationContext context = app.run("--rdma4j.endpoint.enabled=true")) {
            assertThat(context.getBean(RdmaEndpoint.class).isRunning()).isTrue();
        }
        assertThat(WithProbes.SEEN).containsExactly(
                "start@" + below + " endpoint running=false",
                "start@" + graceful + " endpoint running=true",
                "stop@" + graceful + " endpoint running=true",
                "stop@" + below + " endpoint running=false");
    }

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class WebPublisher {
        static final CountDownLatch requestEntered = new CountDownLatch(1);
        static final CountDownLatch release = new CountDownLatch(1);
        static final CountDownLatch closing = new CountDownLatch(1);

        @RdmaRegion("greeting")
        MemorySegment greeting(Arena arena) {
            return arena.allocateFrom("still served while the web server drains");
        }

        @Bean
        SlowController slowController(RdmaTemplate template) {
            return new SlowController(template);
        }

        /** Stops just before the web server's graceful shutdown begins: the context is closing from here on. */
        @Bean
        SmartLifecycle closingSignal() throws ReflectiveOperationException {
            int phase = webServerGracefulShutdownPhase() + 1;
            return new SmartLifecycle() {
                volatile boolean running;
                @Override public void start() { running = true; }
                @Override public void stop() { running = false; closing.countDown(); }
                @Override public boolean isRunning() { return running; }
                @Override public int getPhase() { return phase; }
            };
        }
    }

    @RestController
    static class SlowController {
        private final RdmaTemplate template;

        SlowController(RdmaTemplate template) {
            this.template = template;
        }

        /** An HTTP request that reads a region through the endpoint only once the context has begun to close. */
        @GetMapping("/slow")
        String slow(@RequestParam("rdmaPort") int rdmaPort) throws InterruptedException {
            WebPublisher.requestEntered.countDown();
            WebPublisher.release.await();
            try (Arena arena = Arena.ofShared()) {
                return template.read(new InetSocketAddress("127.0.0.1", rdmaPort), "greeting", arena).getString(0);
            }
        }
    }

    @Test
    void servesPeersUntilTheWebServerHasDrainedItsRequests() throws Exception {
        ConfigurableApplicationContext app = new SpringApplication(WebPublisher.class).run("--server.port=0",
                "--server.address=127.0.0.1", "--server.shutdown=graceful", "--rdma4j.endpoint.enabled=true");
        RdmaTemplate publisher = app.getBean(RdmaTemplate.class);
        Thread closer = null;
        try (HttpClient http = HttpClient.newHttpClient()) {
            int httpPort = Integer.parseInt(app.getEnvironment().getProperty("local.server.port"));
            int rdmaPort = app.getBean(RdmaEndpoint.class).localAddress().getPort();
            var response = http.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + httpPort + "/slow?rdmaPort=" + rdmaPort))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertThat(WebPublisher.requestEntered.await(30, TimeUnit.SECONDS)).isTrue();

            closer = Thread.ofPlatform().start(app::close);
            assertThat(WebPublisher.closing.await(30, TimeUnit.SECONDS)).as("the context began to close").isTrue();
            WebPublisher.release.countDown();

            HttpResponse<String> done = response.get(30, TimeUnit.SECONDS);
            assertThat(done.statusCode()).as(done.body()).isEqualTo(200);
            assertThat(done.body()).isEqualTo("still served while the web server drains");
        } finally {
            WebPublisher.release.countDown();
            if (closer != null) {
                closer.join(30_000);
            }
            app.close();
        }
        assertThat(publisher.publishedNames()).isEmpty();
    }

    /** Live keep-alive threads not in {@code earlier} (those of other tests' contexts may still be ending). */
    static List<Thread> keepAliveThreadsBesides(List<Thread> earlier) {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals(RdmaEndpoint.KEEP_ALIVE_THREAD_NAME) && t.isAlive() && !earlier.contains(t)).toList();
    }

    @Test
    void holdsANonDaemonThreadExactlyWhileRunning() throws InterruptedException {
        List<Thread> earlier = keepAliveThreadsBesides(List.of());
        SpringApplication app = new SpringApplication(StarterOnlyPublisher.class);
        app.setWebApplicationType(WebApplicationType.NONE);
        ConfigurableApplicationContext context = app.run("--rdma4j.endpoint.enabled=true");
        List<Thread> keepAlive;
        try {
            keepAlive = keepAliveThreadsBesides(earlier);
            assertThat(keepAlive).hasSize(1);
            assertThat(keepAlive.getFirst().isDaemon()).isFalse();
        } finally {
            context.close();
        }
        keepAlive.getFirst().join(5_000);
        assertThat(keepAlive.getFirst().isAlive()).isFalse();
    }

    @Test
    void withoutATransportNoThreadHoldsTheJvm() {
        List<Thread> earlier = keepAliveThreadsBesides(List.of());
        SpringApplication app = new SpringApplication(StarterOnlyPublisher.class);
        app.setWebApplicationType(WebApplicationType.NONE);
        try (ConfigurableApplicationContext context = app.run("--rdma4j.endpoint.enabled=true", "--rdma4j.provider=nosuch",
                "--rdma4j.fail-fast=false")) {
            assertThat(context.getBean(RdmaEndpoint.class).isRunning()).isFalse();
            assertThat(keepAliveThreadsBesides(earlier)).isEmpty();
        }
    }

    /**
     * A starter-only application (no web server) in its own JVM: its main method returns, yet it keeps
     * serving its region until its context is closed, and then the JVM exits by itself with status 0.
     */
    @Test
    void aStarterOnlyApplicationServesUntilItsContextCloses() throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process process = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                StarterOnlyPublisher.class.getName()).redirectErrorStream(true).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
             Writer in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8)) {
            List<String> lines = new ArrayList<>();
            int port = -1;
            for (String line; port < 0 && (line = out.readLine()) != null; ) {
                lines.add(line);
                if (line.startsWith(StarterOnlyPublisher.READY)) {
                    port = Integer.parseInt(line.substring(StarterOnlyPublisher.READY.length()));
                }
            }
            assertThat(port).as("the publisher's output: %s", lines).isPositive();
            Thread drain = Thread.ofPlatform().daemon().start(() -> out.lines().forEach(lines::add));

            // main() has returned; only the endpoint holds the JVM now.
            assertThat(process.waitFor(2, TimeUnit.SECONDS)).as("the publisher exited: %s", lines).isFalse();
            try (RdmaTransport transport = RdmaTransport.open(TransportConfig.builder().provider("tcp").build());
                 RdmaTemplate reader = new RdmaTemplate(transport);
                 Arena arena = Arena.ofShared()) {
                MemorySegment copy = reader.read(new InetSocketAddress("127.0.0.1", port), StarterOnlyPublisher.REGION, arena);
                assertThat(copy.getString(0)).isEqualTo(StarterOnlyPublisher.CONTENT);
            }
            assertThat(process.isAlive()).isTrue();

            in.write(StarterOnlyPublisher.CLOSE + "\n");
            in.flush();
            assertThat(process.waitFor(30, TimeUnit.SECONDS)).as("the publisher kept running after its context closed: %s", lines).isTrue();
            assertThat(process.exitValue()).as("output: %s", lines).isZero();
            drain.join(5_000);
        } finally {
            process.destroyForcibly();
        }
    }
}
