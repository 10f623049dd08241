package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The verbs message protocol between two channels, with the device played by the SENDs each side posts, delivered
 * in order: fragments, credits, the shared pool's loans, and loans given back by a side that stopped sending. The
 * lab runs the same protocol on Soft-RoCE and soft-iWARP.
 */
class MessageChannelTest {

    private static final int DEPTH = 32;
    private static final int MAX_MESSAGE = 64 << 10;
    private static final long IDLE = TimeUnit.SECONDS.toNanos(1);

    @Test
    void aSideThatStoppedSendingGivesItsLoanBackAndSendsOnWithItsReservedCredits() {
        Side a = new Side();
        Side b = new Side();
        List<ByteBuffer> sent = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            sent.add(a.send(message(MAX_MESSAGE, i)));
        }
        deliverAll(a, b);
        assertThat(b.received).isEqualTo(sent);
        assertThat(b.pool.lent()).as("credits B lent A for its backlog, unused once it is done").isPositive();

        assertThat(a.channel.releaseIdleCredits(System.nanoTime(), IDLE)).as("not idle yet").isFalse();
        assertThat(a.channel.releaseIdleCredits(System.nanoTime() + 2 * IDLE, IDLE)).isTrue();
        deliverAll(a, b);
        assertThat(b.pool.lent()).as("lent credits back in B's pool").isZero();
        assertThat(b.received).as("the release is not a message").hasSize(20);
        assertThat(a.channel.releaseIdleCredits(System.nanoTime() + 4 * IDLE, IDLE)).as("nothing left to give back")
                .isFalse();

        ByteBuffer after = a.send(message(MAX_MESSAGE, 99));
        deliverAll(a, b);
        assertThat(b.received).last().isEqualTo(after);
    }

    @Test
    void aSideWithMessagesWaitingKeepsItsLoan() {
        Side a = new Side();
        Side b = new Side();
        for (int i = 0; i < 4; i++) {
            a.send(message(MAX_MESSAGE, i));
        }
        deliver(a, b, 3); // B lends; A still has fragments waiting for credits
        assertThat(a.channel.releaseIdleCredits(System.nanoTime() + 2 * IDLE, IDLE)).isFalse();
    }

    @Test
    void trafficBothWaysDeliversEveryMessageInOrderAndEndsWithNothingLent() {
        Random random = new Random(42);
        Side a = new Side();
        Side b = new Side();
        List<ByteBuffer> toB = new ArrayList<>();
        List<ByteBuffer> toA = new ArrayList<>();
        int mostLent = 0;
        for (int round = 0; round < 400; round++) {
            switch (random.nextInt(6)) {
                case 0 -> toB.add(a.send(message(random.nextInt(MAX_MESSAGE + 1), round)));
                case 1 -> toA.add(b.send(message(random.nextInt(MAX_MESSAGE + 1), round)));
                case 2 -> a.channel.releaseIdleCredits(System.nanoTime() + 2 * IDLE, IDLE);
                case 3 -> b.channel.releaseIdleCredits(System.nanoTime() + 2 * IDLE, IDLE);
                default -> {
                    deliver(a, b, random.nextInt(8));
                    deliver(b, a, random.nextInt(8));
                }
            }
            assertThat(a.pool.lent()).isBetween(0, ReceivePool.SHARED_CREDITS);
            assertThat(b.pool.lent()).isBetween(0, ReceivePool.SHARED_CREDITS);
            mostLent = Math.max(mostLent, Math.max(a.pool.lent(), b.pool.lent()));
        }
        assertThat(mostLent).as("credits lent at some point").isPositive();
        while (!a.wire.isEmpty() || !b.wire.isEmpty()) {
            deliverAll(a, b);
            deliverAll(b, a);
        }
        assertThat(b.received).isEqualTo(toB);
        assertThat(a.received).isEqualTo(toA);
        assertThat(a.futures).allMatch(f -> f.isDone() && !f.isCompletedExceptionally());
        assertThat(b.futures).allMatch(f -> f.isDone() && !f.isCompletedExceptionally());

        long later = System.nanoTime() + 2 * IDLE;
        a.channel.releaseIdleCredits(later, IDLE);
        b.channel.releaseIdleCredits(later, IDLE);
        while (!a.wire.isEmpty() || !b.wire.isEmpty()) {
            deliverAll(a, b);
            deliverAll(b, a);
        }
        assertThat(a.pool.lent()).as("A's pool, both sides idle").isZero();
        assertThat(b.pool.lent()).as("B's pool, both sides idle").isZero();
    }

    @Test
    void aReleaseOfCreditsThePeerDoesNotHoldIsAProtocolViolation() {
        Side b = new Side();
        ByteBuffer tooMany = ByteBuffer.allocate(Integer.BYTES).putInt(0, 1000);
        assertThatThrownBy(() -> b.channel.accept(new MessageChannel.Fragment(0, MessageChannel.FLAG_RELEASE, tooMany)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("released 1000 credits");
        ByteBuffer negative = ByteBuffer.allocate(Integer.BYTES).putInt(0, -1);
        assertThatThrownBy(() -> new Side().channel.accept(new MessageChannel.Fragment(0, MessageChannel.FLAG_RELEASE, negative)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("released -1 credits");
        assertThatThrownBy(() -> MessageChannel.checkLength(MessageChannel.HEADER, MessageChannel.FLAG_RELEASE, 4096))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("credit release of 8 bytes");
        assertThatThrownBy(() -> MessageChannel.checkLength(MessageChannel.RELEASE_LENGTH,
                MessageChannel.FLAG_RELEASE | MessageChannel.FLAG_MORE, 4096))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("unknown flag");
    }

    private static ByteBuffer message(int size, int seed) {
        byte[] b = new byte[size];
        new Random(seed).nextBytes(b);
        return ByteBuffer.wrap(b);
    }

    private static void deliverAll(Side from, Side to) {
        while (!from.wire.isEmpty() || !to.wire.isEmpty()) {
            deliver(from, to, Integer.MAX_VALUE);
            deliver(to, from, Integer.MAX_VALUE);
        }
    }

    /**
     * Delivers up to {@code most} of the SENDs {@code from} posted to {@code to}, as the device does: into a receive
     * slot, then the sender's completion.
     */
    private static void deliver(Side from, Side to, int most) {
        for (int i = 0; i < most && !from.wire.isEmpty(); i++) {
            Side.Sent s = from.wire.poll();
            MemorySegment slot = MemorySegment.ofArray(new byte[MessageChannel.slotSize(MAX_MESSAGE)]);
            slot.copyFrom(from.slot(s.slot()).asSlice(0, s.length()));
            MessageChannel.Received r = to.channel.accept(MessageChannel.read(slot, s.length()));
            if (r.complete() && r.payload() != null) {
                to.received.add(r.payload());
            }
            from.posted.completeUpTo(s.wrId(), from.channel::slotFreed).complete(WorkCompletions.SUCCESS, "peer");
            from.channel.flush();
        }
    }

    /** One side of the connection: its channel, the SENDs it posted and not yet delivered, its shared pool. */
    private static final class Side implements MessageChannel.FragmentSender {

        record Sent(long wrId, int slot, int length) {
        }

        final SharedCredits pool = new SharedCredits(ReceivePool.SHARED_CREDITS);
        final PostedRequests posted = new PostedRequests();
        final MessageChannel channel = new MessageChannel(this, pool, posted, DEPTH, MAX_MESSAGE);
        final ArrayDeque<Sent> wire = new ArrayDeque<>();
        final List<ByteBuffer> received = new ArrayList<>();
        final List<CompletableFuture<Void>> futures = new ArrayList<>();
        private final List<MemorySegment> slots = new ArrayList<>();
        private final ArrayDeque<Integer> free = new ArrayDeque<>();

        Side() {
            channel.open(new ConnectData.PeerParameters(MAX_MESSAGE, DEPTH, null));
        }

        ByteBuffer send(ByteBuffer message) {
            CompletableFuture<Void> f = new CompletableFuture<>();
            futures.add(f);
            channel.send(message.duplicate(), f);
            return message;
        }

        @Override
        public int take() {
            if (free.isEmpty()) {
                slots.add(MemorySegment.ofArray(new byte[MessageChannel.HEADER + MessageChannel.FRAGMENT_PAYLOAD]));
                return slots.size() - 1;
            }
            return free.poll();
        }

        @Override
        public MemorySegment slot(int slot) {
            return slots.get(slot);
        }

        @Override
        public int send(long wrId, int slot, int length) {
            wire.add(new Sent(wrId, slot, length));
            return 0;
        }

        @Override
        public void free(int slot) {
            free.add(slot);
        }
    }
}
