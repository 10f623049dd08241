package io.rdma4j.core.metrics;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.ResourceBundle;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import static org.assertj.core.api.Assertions.assertThat;

class TransportMetricsTest {

    @Test
    void bufferedBytesAndDisplacedHandshakesReachMicrometer() {
        TransportMetrics metrics = new TransportMetrics("tcp");
        AtomicLong held = new AtomicLong(4096);
        metrics.bufferedBytesFrom(held::get);
        metrics.handshakeDisplaced();
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new MicrometerMetrics(metrics).bindTo(registry);
        assertThat(registry.get("rdma4j.buffered.bytes").tag("provider", "tcp").gauge().value()).isEqualTo(4096);
        held.set(0);
        assertThat(registry.get("rdma4j.buffered.bytes").gauge().value()).isZero();
        metrics.handshakeDisplaced();
        assertThat(registry.get("rdma4j.handshakes.displaced").functionCounter().count()).isEqualTo(2);
    }

    @Test
    void messageBuffersAreCountedApartFromRegions() {
        TransportMetrics metrics = new TransportMetrics("verbs");
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new MicrometerMetrics(metrics).bindTo(registry);
        metrics.regionRegistered(1 << 20);
        metrics.messageBuffersRegistered(3 << 16);
        metrics.messageBuffersRegistered(3 << 16);
        assertThat(metrics.messageBufferBytes()).isEqualTo(6 << 16);
        assertThat(metrics.registeredBytes()).as("regions only").isEqualTo(1 << 20);
        assertThat(registry.get("rdma4j.message.buffers.bytes").tag("provider", "verbs").gauge().value()).isEqualTo(6 << 16);
        metrics.messageBuffersDeregistered(3 << 16);
        assertThat(registry.get("rdma4j.message.buffers.bytes").gauge().value()).isEqualTo(3 << 16);
    }

    @Test
    void lentReceiveCreditsComeFromTheProviderAndAreAGauge() {
        TransportMetrics metrics = new TransportMetrics("verbs");
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new MicrometerMetrics(metrics).bindTo(registry);
        assertThat(metrics.lentReceiveCredits()).as("before a provider says").isZero();
        AtomicLong lent = new AtomicLong(30);
        metrics.lentReceiveCreditsFrom(lent::get);
        assertThat(metrics.lentReceiveCredits()).isEqualTo(30);
        assertThat(registry.get("rdma4j.receive.credits.lent").tag("provider", "verbs").gauge().value()).isEqualTo(30);
        lent.set(0);
        assertThat(registry.get("rdma4j.receive.credits.lent").gauge().value()).isZero();
    }

    @Test
    void aFloodOfRejectionsIsCountedInFullAndWarnedAboutAtMostOnceASecond() throws Exception {
        TransportMetrics metrics = new TransportMetrics("tcp");
        RecordingLogger log = new RecordingLogger();
        long start = System.nanoTime();
        for (int i = 0; i < 10_000; i++) {
            int n = i;
            metrics.recordRejected(log, () -> "rejection " + n);
        }
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);

        assertThat(metrics.rejectedRequests()).isEqualTo(10_000);
        assertThat(log.warnings()).as("one warning per second begun, the first rejection's among them")
                .hasSizeBetween(1, (int) seconds + 1)
                .first().isEqualTo("rejection 0");
        assertThat(log.debug).hasSize(10_000 - log.warnings().size());

        Thread.sleep(1_100);
        metrics.recordRejected(log, () -> "after a quiet second");
        assertThat(log.warnings().getLast()).startsWith("after a quiet second (")
                .contains(" more rejection(s) since the last warning, logged at DEBUG)");
    }

    /** Keeps what is logged, by level. */
    private static final class RecordingLogger implements System.Logger {
        final List<String> warning = new CopyOnWriteArrayList<>();
        final List<String> debug = new CopyOnWriteArrayList<>();

        List<String> warnings() {
            return warning;
        }

        @Override
        public String getName() {
            return "recording";
        }

        @Override
        public boolean isLoggable(Level level) {
            return true;
        }

        @Override
        public void log(Level level, Supplier<String> message) {
            log(level, (ResourceBundle) null, message.get(), (Object[]) null);
        }

        @Override
        public void log(Level level, ResourceBundle bundle, String message, Throwable thrown) {
            log(level, bundle, message, (Object[]) null);
        }

        @Override
        public void log(Level level, ResourceBundle bundle, String format, Object... params) {
            (level == Level.WARNING ? warning : debug).add(format);
        }
    }
}
