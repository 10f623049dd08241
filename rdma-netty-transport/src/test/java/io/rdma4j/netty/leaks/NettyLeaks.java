package io.rdma4j.netty.leaks;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.ResourceLeakDetectorFactory;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Makes a leaked {@code ByteBuf} fail the tests: the session listener installs, before any buffer class loads, a
 * leak detector that records every leak Netty reports (at the paranoid level surefire sets, every buffer is tracked),
 * and the extension, registered for every test class, collects garbage after the class and fails it on a record.
 */
public final class NettyLeaks implements LauncherSessionListener, AfterAllCallback {

    private static final ConcurrentLinkedQueue<String> LEAKS = new ConcurrentLinkedQueue<>();

    /** The launcher and JUnit create it. */
    public NettyLeaks() {
    }

    @Override
    public void launcherSessionOpened(LauncherSession session) {
        ResourceLeakDetectorFactory.setResourceLeakDetectorFactory(new ResourceLeakDetectorFactory() {
            @Override
            @SuppressWarnings("deprecation") // the factory's one abstract method; its other overload calls it
            public <T> ResourceLeakDetector<T> newResourceLeakDetector(Class<T> resource, int samplingInterval, long maxActive) {
                return new Recording<>(resource, samplingInterval);
            }
        });
    }

    @Override
    public void afterAll(ExtensionContext context) throws InterruptedException {
        assertThat(ResourceLeakDetector.getLevel()).as("surefire runs with -Dio.netty.leakDetection.level=paranoid")
                .isEqualTo(ResourceLeakDetector.Level.PARANOID);
        assertThat(collect()).as("ByteBuf leaks Netty's detector reported during " + context.getDisplayName()).isEmpty();
    }

    /** The leaks reported so far, after a collection that makes unreleased unreachable buffers show. */
    public static List<String> collect() throws InterruptedException {
        // Leaks are reported when a tracked buffer was collected unreleased and the next buffer is tracked.
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(20);
            release(PooledByteBufAllocator.DEFAULT.directBuffer(16));
            release(UnpooledByteBufAllocator.DEFAULT.heapBuffer(16));
        }
        List<String> leaks = new ArrayList<>();
        String leak;
        while ((leak = LEAKS.poll()) != null) {
            leaks.add(leak);
        }
        return leaks;
    }

    private static void release(ByteBuf buf) {
        buf.release();
    }

    private static final class Recording<T> extends ResourceLeakDetector<T> {
        Recording(Class<T> resource, int samplingInterval) {
            super(resource, samplingInterval);
        }

        @Override
        protected boolean needReport() {
            return true;
        }

        @Override
        protected void reportTracedLeak(String resourceType, String records) {
            LEAKS.add(resourceType + " leaked:" + records);
            super.reportTracedLeak(resourceType, records);
        }

        @Override
        protected void reportUntracedLeak(String resourceType) {
            LEAKS.add(resourceType + " leaked (untraced)");
            super.reportUntracedLeak(resourceType);
        }
    }
}
