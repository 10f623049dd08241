package io.rdma4j.core.verbs;

import io.rdma4j.core.spi.ConnectionEvents;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

import static org.assertj.core.api.Assertions.assertThat;

class FacadeEventsTest {

    private final ReentrantLock lock = new ReentrantLock();
    private final FacadeEvents facade = new FacadeEvents(lock);

    private static ByteBuffer text(String s) {
        return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
    }

    /** What the connection does on a receive: asks under the lock, delivers without it. */
    private void arrive(String s) {
        ConnectionEvents to;
        lock.lock();
        try {
            to = facade.deliverTo(text(s));
        } finally {
            lock.unlock();
        }
        if (to != null) {
            to.onMessage(text(s));
        }
    }

    @Test
    void aMessageArrivingWhileTheEarlyOnesAreDeliveredComesAfterThem() {
        arrive("first");
        arrive("second");
        List<String> got = new ArrayList<>();
        facade.start(new ConnectionEvents() {
            @Override
            public void onMessage(ByteBuffer message) {
                String s = StandardCharsets.UTF_8.decode(message).toString();
                got.add(s);
                if (s.equals("first")) {
                    arrive("third"); // the progress thread, while start() is still delivering
                }
            }

            @Override
            public void onClosed(Throwable cause) {
                got.add("closed");
            }
        }, () -> null);
        arrive("fourth");
        assertThat(got).containsExactly("first", "second", "third", "fourth");
    }

    @Test
    void aConnectionClosedBeforeTheFacadeStartedReportsItsCloseAfterItsMessages() {
        arrive("last words");
        List<String> got = new ArrayList<>();
        facade.start(new ConnectionEvents() {
            @Override
            public void onMessage(ByteBuffer message) {
                got.add(StandardCharsets.UTF_8.decode(message).toString());
            }

            @Override
            public void onClosed(Throwable cause) {
                got.add("closed");
            }
        }, () -> new FacadeEvents.ClosedAlready(null));
        facade.reportClosed(() -> null);
        assertThat(got).containsExactly("last words", "closed");
    }
}
