package io.rdma4j.core.tcp;

import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class ListenerSlotsTest {

    private static final InetAddress A = address(2);
    private static final InetAddress B = address(3);

    private final List<String> evicted = new ArrayList<>();

    private ListenerSlots.Claim admitted(ListenerSlots slots, InetAddress from, String name) {
        ListenerSlots.Admission a = slots.admit(from, () -> evicted.add(name));
        a.evicted().forEach(ListenerSlots::evict);
        assertThat(a.refusal()).as("refusal of %s", name).isNull();
        return a.claim();
    }

    @Test
    void aFullHandshakeBudgetPerAddressDisplacesThatAddresssOldestHalfOpenSocket() {
        ListenerSlots slots = new ListenerSlots(100, 100, 10, 2);
        ListenerSlots.Claim b1 = admitted(slots, B, "b1");
        ListenerSlots.Claim a1 = admitted(slots, A, "a1");
        admitted(slots, A, "a2");
        admitted(slots, A, "a3");
        assertThat(evicted).containsExactly("a1");
        assertThat(slots.displaced(a1)).isTrue();
        assertThat(slots.established(a1)).as("a displaced socket cannot become a connection").isFalse();
        assertThat(slots.displaced(b1)).isFalse();
        assertThat(slots.handshakes()).isEqualTo(3);
        assertThat(slots.admitted()).isEqualTo(3);
    }

    @Test
    void aFullTotalHandshakeBudgetDisplacesTheOldestOfAnyAddress() {
        ListenerSlots slots = new ListenerSlots(100, 100, 2, 2);
        admitted(slots, A, "a1");
        admitted(slots, B, "b1");
        admitted(slots, B, "b2");
        assertThat(evicted).containsExactly("a1");
    }

    @Test
    void establishedConnectionsAreNeverDisplacedAndRefuseNewSocketsOnceTheyFillTheListener() {
        ListenerSlots slots = new ListenerSlots(3, 3, 2, 2);
        ListenerSlots.Claim e1 = admitted(slots, A, "e1");
        ListenerSlots.Claim e2 = admitted(slots, B, "e2");
        assertThat(slots.established(e1)).isTrue();
        assertThat(slots.established(e2)).isTrue();
        admitted(slots, A, "h1");
        // the listener is full: the half-open one makes room, the established ones stay
        admitted(slots, B, "h2");
        assertThat(evicted).containsExactly("h1");
        assertThat(slots.displaced(e1)).isFalse();
        assertThat(slots.displaced(e2)).isFalse();
        assertThat(slots.admitted()).isEqualTo(3);
    }

    @Test
    void whenOnlyEstablishedConnectionsRemainTheNewSocketIsRefused() {
        ListenerSlots slots = new ListenerSlots(2, 2, 2, 2);
        slots.established(admitted(slots, A, "e1"));
        slots.established(admitted(slots, B, "e2"));
        ListenerSlots.Admission refused = slots.admit(A, () -> evicted.add("new"));
        assertThat(refused.claim()).isNull();
        assertThat(refused.refusal()).contains("tcp.max-connections");
        assertThat(refused.evicted()).isEmpty();

        ListenerSlots perAddress = new ListenerSlots(10, 1, 2, 1);
        perAddress.established(admitted(perAddress, A, "e3"));
        assertThat(perAddress.admit(A, () -> { }).refusal()).contains("tcp.max-connections-per-address");
        assertThat(perAddress.admit(B, () -> { }).claim()).as("another address still gets in").isNotNull();
    }

    @Test
    void releaseIsIdempotentAndGivesEverySlotBack() {
        ListenerSlots slots = new ListenerSlots(2, 2, 1, 1);
        ListenerSlots.Claim c = admitted(slots, A, "c");
        slots.release(c);
        slots.release(c);
        assertThat(slots.admitted()).isZero();
        assertThat(slots.handshakes()).isZero();
        admitted(slots, A, "d");
        admitted(slots, B, "e");
        assertThat(evicted).as("the total budget of one displaced d").containsExactly("d");
    }

    private static InetAddress address(int last) {
        try {
            return InetAddress.getByAddress(new byte[] {127, 0, 0, (byte) last});
        } catch (java.net.UnknownHostException e) {
            throw new AssertionError(e);
        }
    }
}
