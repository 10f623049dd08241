package io.rdma4j.core.tcp;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;

/**
 * A listener's connection slots: at most {@code maxConnections} accepted sockets, {@code maxPerAddress} from one
 * remote IP, and of those at most {@code maxHandshakes} (and {@code maxHandshakesPerAddress} from one IP) still in
 * their handshake. Half-open sockets cost an attacker nothing to hold, so they get a budget of their own: when a new
 * socket finds it full, or finds every slot taken, the oldest half-open socket (of the same address first) makes
 * room, as servers under SYN floods drop the oldest half-open connections. Established connections are never
 * displaced; when they alone fill the slots, a new socket is refused.
 */
final class ListenerSlots {

    /** One accepted socket's claim, from accept until it is released. */
    static final class Claim {
        final InetAddress from;
        private final Runnable evict;
        private boolean handshaking = true;
        private boolean released;
        private boolean displaced;

        private Claim(InetAddress from, Runnable evict) {
            this.from = from;
            this.evict = evict;
        }
    }

    /** What {@link #admit} decided: the claim (null when refused), why it was refused, and whom it displaced. */
    record Admission(Claim claim, String refusal, List<Claim> evicted) {
    }

    private final int maxConnections;
    private final int maxPerAddress;
    private final int maxHandshakes;
    private final int maxHandshakesPerAddress;
    private int admitted;
    private final Map<InetAddress, Integer> perAddress = new HashMap<>();
    /** In accept order, so the first is the oldest. */
    private final LinkedHashSet<Claim> handshaking = new LinkedHashSet<>();
    private final Map<InetAddress, Integer> handshakesPerAddress = new HashMap<>();

    ListenerSlots(int maxConnections, int maxPerAddress, int maxHandshakes, int maxHandshakesPerAddress) {
        this.maxConnections = maxConnections;
        this.maxPerAddress = maxPerAddress;
        this.maxHandshakes = maxHandshakes;
        this.maxHandshakesPerAddress = maxHandshakesPerAddress;
    }

    /**
     * Claims a slot for a socket accepted from {@code from}, displacing the oldest half-open sockets as needed; the
     * caller runs the displaced claims' {@code evict} actions (outside this object's lock).
     */
    synchronized Admission admit(InetAddress from, Runnable evict) {
        List<Claim> evicted = new ArrayList<>(2);
        if (count(handshakesPerAddress, from) >= maxHandshakesPerAddress) {
            evictOldest(from, evicted);
        }
        if (handshaking.size() >= maxHandshakes) {
            evictOldest(null, evicted);
        }
        if (count(perAddress, from) >= maxPerAddress && !evictOldest(from, evicted)) {
            return new Admission(null, "the address has " + count(perAddress, from)
                    + " established connections (tcp.max-connections-per-address)", evicted);
        }
        if (admitted >= maxConnections && !evictOldest(null, evicted)) {
            return new Admission(null, "the listener has " + admitted + " established connections (tcp.max-connections)",
                    evicted);
        }
        Claim claim = new Claim(from, evict);
        admitted++;
        perAddress.merge(from, 1, Integer::sum);
        handshaking.add(claim);
        handshakesPerAddress.merge(from, 1, Integer::sum);
        return new Admission(claim, null, evicted);
    }

    /** The claim's handshake finished; false when it was displaced meanwhile (its socket is being closed). */
    synchronized boolean established(Claim claim) {
        if (claim.released) {
            return false;
        }
        endHandshake(claim);
        return true;
    }

    /** Whether the claim was displaced by newer sockets while in its handshake. */
    synchronized boolean displaced(Claim claim) {
        return claim.displaced;
    }

    /** Gives the claim's slot back; idempotent. */
    synchronized void release(Claim claim) {
        if (claim.released) {
            return;
        }
        claim.released = true;
        endHandshake(claim);
        admitted--;
        decrement(perAddress, claim.from);
    }

    synchronized int handshakes() {
        return handshaking.size();
    }

    synchronized int admitted() {
        return admitted;
    }

    /** Releases the oldest half-open claim (from {@code from} when not null) into {@code evicted}; false when none. */
    private boolean evictOldest(InetAddress from, List<Claim> evicted) {
        for (Iterator<Claim> it = handshaking.iterator(); it.hasNext(); ) {
            Claim c = it.next();
            if (from == null || c.from.equals(from)) {
                c.displaced = true;
                release(c);
                evicted.add(c);
                return true;
            }
        }
        return false;
    }

    private void endHandshake(Claim claim) {
        if (claim.handshaking) {
            claim.handshaking = false;
            handshaking.remove(claim);
            decrement(handshakesPerAddress, claim.from);
        }
    }

    static void evict(Claim claim) {
        claim.evict.run();
    }

    private static int count(Map<InetAddress, Integer> counts, InetAddress from) {
        return counts.getOrDefault(from, 0);
    }

    private static void decrement(Map<InetAddress, Integer> counts, InetAddress from) {
        counts.computeIfPresent(from, (a, n) -> n == 1 ? null : n - 1);
    }
}
