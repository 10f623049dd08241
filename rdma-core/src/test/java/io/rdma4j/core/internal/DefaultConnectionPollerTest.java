package io.rdma4j.core.internal;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.nio.channels.Pipe;
import java.nio.channels.SelectionKey;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The poller of a provider that has none of its own (verbs): it reads nothing itself, but waits for the
 * application's plain sockets it watches, and for a wake-up.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class DefaultConnectionPollerTest {

    @Test
    void aWatchedSocketIsReportedWithinPollAndAWakeUpEndsTheWait() throws Exception {
        DefaultConnectionPoller poller = new DefaultConnectionPoller(null);
        Pipe pipe = Pipe.open();
        try {
            pipe.source().configureBlocking(false);
            AtomicInteger readable = new AtomicInteger();
            SelectionKey key = poller.watch(pipe.source(), SelectionKey.OP_READ, ops -> {
                assertThat(ops & SelectionKey.OP_READ).isNotZero();
                readable.incrementAndGet();
                try {
                    pipe.source().read(ByteBuffer.allocate(16));
                } catch (java.io.IOException e) {
                    throw new AssertionError(e);
                }
            });
            poller.poll(0);
            assertThat(readable).as("nothing written yet").hasValue(0);

            pipe.sink().write(ByteBuffer.wrap(new byte[] {1}));
            long start = System.nanoTime();
            poller.poll(TimeUnit.SECONDS.toNanos(10));
            assertThat(readable).hasValue(1);
            assertThat(System.nanoTime() - start).as("the input ended the wait").isLessThan(TimeUnit.SECONDS.toNanos(5));

            Thread.ofVirtual().start(() -> {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                poller.wakeup();
            });
            start = System.nanoTime();
            poller.poll(TimeUnit.SECONDS.toNanos(10));
            assertThat(System.nanoTime() - start).as("the wake-up ended the wait").isLessThan(TimeUnit.SECONDS.toNanos(5));

            key.cancel();
            pipe.sink().write(ByteBuffer.wrap(new byte[] {2}));
            poller.poll(TimeUnit.MILLISECONDS.toNanos(50));
            assertThat(readable).as("no longer watched").hasValue(1);
        } finally {
            poller.close();
            pipe.sink().close();
            pipe.source().close();
        }
    }
}
