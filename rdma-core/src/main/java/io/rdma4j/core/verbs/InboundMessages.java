package io.rdma4j.core.verbs;

import io.rdma4j.core.AuthenticationException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.spi.ConnectionEvents;

import java.util.ArrayDeque;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * What one connection's receives bring, in the order they completed: each fragment copied out of its shared slot
 * (which then serves every connection again), its credits counted ({@link MessageChannel}), the peer's proof of the
 * shared secret checked before anything else ({@link ProofExchange}), and whole messages handed to the facade. A peer
 * that breaks the protocol or fails its proof closes its own connection only.
 *
 * <p>On the connecting side the queue pair can receive before the connection learns its peer's parameters: the
 * accepting side may send as soon as it sees the connection established, and its first fragments can complete
 * before the ESTABLISHED event that carries those parameters is handled here. They wait until {@link #opened}, a
 * few at most.
 */
final class InboundMessages {

    /** What the connection does for this room. */
    interface Owner {
        /** Under the connection's lock: whether it is closing or closed; what arrives is then delivered, nothing sent. */
        boolean closing();

        /** The peer broke the verbs message protocol, or failed authentication. */
        void refuse(RdmaException violation);

        void beginClose(RdmaException cause);
    }

    private final ReentrantLock lock;
    private final ReceivePool receives;
    private final boolean iwarp;
    private final MessageChannel messages;
    private final ProofExchange proof;
    private final FacadeEvents facade;
    private final Owner owner;
    private final Supplier<String> peer;
    /**
     * Fragments that may arrive before {@link #opened}: what the peer's receives are reserved for (an honest peer
     * sends no more before it hears from this side); whether they were its to send is checked once they are handled.
     */
    private static final int EARLY_MOST = ReceivePool.RESERVED_CREDITS + ReceivePool.CONTROL_SLOTS;
    /**
     * Under the lock: fragments that arrived before {@link #opened}, in order; null once the connection knows its
     * peer's parameters and what came early has been handled.
     */
    private ArrayDeque<MessageChannel.Fragment> early = new ArrayDeque<>();

    InboundMessages(ReentrantLock lock, ReceivePool receives, boolean iwarp, MessageChannel messages, ProofExchange proof,
                    FacadeEvents facade, Owner owner, Supplier<String> peer) {
        this.lock = lock;
        this.receives = receives;
        this.iwarp = iwarp;
        this.messages = messages;
        this.proof = proof;
        this.facade = facade;
        this.owner = owner;
        this.peer = peer;
    }

    /** A receive completed (with {@code status}, {@code byteLength} bytes) into the slot {@code wrId} names. */
    void onReceive(long wrId, int status, int byteLength) {
        ReceivePool.Arrival arrival = receives.take(wrId, status, byteLength, iwarp, peer.get());
        if (arrival.failure() instanceof ProtocolException violation) {
            owner.refuse(violation);
            return;
        }
        MessageChannel.Fragment fragment = arrival.fragment();
        if (fragment == null) {
            if (arrival.failure() != null) {
                owner.beginClose(arrival.failure());
            }
            return;
        }
        String tooEarly = null;
        lock.lock();
        try {
            if (early != null) {
                if (early.size() < EARLY_MOST) {
                    early.add(fragment);
                    return;
                }
                tooEarly = early.stream().map(f -> Integer.toHexString(f.flag())).toList().toString();
            }
        } finally {
            lock.unlock();
        }
        if (tooEarly != null) {
            owner.refuse(new ProtocolException("peer sent more than " + EARLY_MOST + " messages before the connection"
                    + " was established (flags " + tooEarly + "): not an rdma4j verbs peer, or a corrupted one"));
            return;
        }
        accept(fragment);
    }

    /**
     * The connection knows its peer's parameters ({@link MessageChannel#open}): handles what arrived before, in order,
     * and from then on each fragment as it arrives. Called once, without the lock.
     */
    void opened() {
        while (true) {
            MessageChannel.Fragment next;
            lock.lock();
            try {
                next = early == null ? null : early.poll();
                if (next == null) {
                    early = null;
                    return;
                }
            } finally {
                lock.unlock();
            }
            accept(next);
        }
    }

    private void accept(MessageChannel.Fragment fragment) {
        MessageChannel.Received received;
        ConnectionEvents deliverTo = null;
        boolean proven;
        boolean closing = false;
        try {
            lock.lock();
            try {
                // What arrived before the connection closed (a peer that sent, then disconnected) is still delivered,
                // until the facade hears of the close; a closing connection sends nothing back, not even credits.
                closing = owner.closing();
                received = closing ? messages.acceptClosing(fragment) : messages.accept(fragment);
                // a proof before the exchange passed, anything else after it (else it throws)
                proven = proof.check(received, peer.get());
                if (proven && !closing) {
                    proof.answer(messages);
                } else if (!proven && received.complete() && received.payload() != null) {
                    deliverTo = facade.deliverTo(received.payload());
                }
            } finally {
                lock.unlock();
            }
        } catch (ProtocolException | AuthenticationException e) {
            if (!closing) {
                owner.refuse(e);
            }
            return;
        }
        if (proven && !closing) {
            proof.succeeded();
        }
        if (deliverTo != null) {
            deliverTo.onMessage(received.payload());
        }
    }
}
