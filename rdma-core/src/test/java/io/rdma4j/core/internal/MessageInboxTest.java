package io.rdma4j.core.internal;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.RdmaException;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

/** The inbox's share of the transport's count of unreceived bytes, which the tcp provider's budget reads. */
class MessageInboxTest {

    private final Object closeLock = new Object();
    private final AtomicReference<RdmaException> closed = new AtomicReference<>();
    private final AtomicLong transport = new AtomicLong();

    private MessageInbox inbox() {
        return new MessageInbox(closeLock, closed::get, Runnable::run, transport, () -> { });
    }

    @Test
    void queuedMessagesCountForTheTransportUntilReceivedEachAtLeastTheOverhead() {
        MessageInbox a = inbox();
        MessageInbox b = inbox();
        a.offer(ByteBuffer.allocate(5000), false);
        a.offer(ByteBuffer.allocate(10), false);
        b.offer(ByteBuffer.allocate(2000), false);
        assertThat(a.queuedBytes()).isEqualTo(5000 + 1024);
        assertThat(transport.get()).isEqualTo(5000 + 1024 + 2000);
        a.receive();
        assertThat(transport.get()).isEqualTo(1024 + 2000);
        b.receive();
        a.receive();
        assertThat(transport.get()).isZero();
    }

    /**
     * The provider hears of every queued message the application takes, after the count fell (a reader held back at
     * the inbox bound then reads on at once), and of nothing else: a message handed straight to a waiting receiver
     * was never counted.
     */
    @Test
    void theProviderIsToldWhenAQueuedMessageIsTaken() {
        java.util.List<Long> countWhenTold = new java.util.ArrayList<>();
        MessageInbox a = new MessageInbox(closeLock, closed::get, Runnable::run, transport,
                () -> countWhenTold.add(transport.get()));
        a.offer(ByteBuffer.allocate(5000), false);
        a.offer(ByteBuffer.allocate(6000), false);
        assertThat(countWhenTold).isEmpty();
        a.receive();
        assertThat(countWhenTold).containsExactly(6000L);
        a.receive();
        assertThat(countWhenTold).containsExactly(6000L, 0L);
        java.util.concurrent.CompletableFuture<ByteBuffer> waiting = a.receive();
        a.offer(ByteBuffer.allocate(7000), false);
        assertThat(waiting).isCompleted();
        assertThat(countWhenTold).as("nothing queued was taken").hasSize(2);
    }

    @Test
    void aClosedConnectionsMessagesStopCountingOnceAndForAll() {
        MessageInbox a = inbox();
        a.offer(ByteBuffer.allocate(4096), false);
        a.offer(ByteBuffer.allocate(4096), false);
        synchronized (closeLock) {
            closed.set(new ConnectionClosedException("closed"));
            a.takeWaiters();
            a.takeWaiters();
        }
        assertThat(transport.get()).as("what a closed connection holds no longer counts").isZero();
        assertThat(a.receive()).as("still receivable").isCompleted();
        a.offer(ByteBuffer.allocate(4096), false);
        assertThat(transport.get()).as("nothing counted twice or taken back twice").isZero();
    }

    @Test
    void aReceiverWithAnExecutorIsCompletedThereAndFallsBackWhenItRefuses() {
        java.util.List<String> ranOn = new java.util.ArrayList<>();
        MessageInbox a = new MessageInbox(closeLock, closed::get, task -> {
            ranOn.add("completions");
            task.run();
        }, transport, () -> { });
        java.util.concurrent.CompletableFuture<ByteBuffer> waiting = a.receive(task -> {
            ranOn.add("own executor");
            task.run();
        });
        assertThat(waiting).isNotDone();
        a.offer(ByteBuffer.wrap(new byte[] {7}), false);
        assertThat(waiting).isCompleted();
        assertThat(waiting.join().get()).isEqualTo((byte) 7);

        java.util.concurrent.CompletableFuture<ByteBuffer> refused = a.receive(task -> {
            throw new java.util.concurrent.RejectedExecutionException("shutting down");
        });
        a.offer(ByteBuffer.wrap(new byte[] {8}), false);
        assertThat(refused.join().get()).isEqualTo((byte) 8);
        assertThat(ranOn).containsExactly("own executor", "completions");
    }
}
