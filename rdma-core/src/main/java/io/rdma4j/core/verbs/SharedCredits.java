package io.rdma4j.core.verbs;

/**
 * The data credits a transport lends to connections whose peers have more to send ({@link MessageChannel}), each one
 * a receive slot its shared receive queue keeps posted beyond the connections' reserved ones: at most {@link #size}
 * are lent at once. A credit comes back when the peer uses it, gives it back idle, or the connection closes.
 * Thread-safe.
 */
final class SharedCredits {

    private final int size;
    private int lent;

    SharedCredits(int size) {
        this.size = size;
    }

    /** Lends up to {@code wanted} credits; returns how many. */
    synchronized int lend(int wanted) {
        int n = Math.max(0, Math.min(wanted, size - lent));
        lent += n;
        return n;
    }

    synchronized void giveBack(int credits) {
        if (credits < 0 || credits > lent) {
            throw new IllegalStateException("giving back " + credits + " credits of " + lent + " lent");
        }
        lent -= credits;
    }

    /** Credits lent now. */
    synchronized int lent() {
        return lent;
    }

    int size() {
        return size;
    }
}
