package io.rdma4j.netty;

import io.netty.channel.ChannelPromise;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.BooleanSupplier;

/**
 * A channel's registration with its {@link RdmaIoHandler} loop, through which rdma4j's threads post the channel's
 * events. An event posted while the channel has no valid registration (it is moving to another loop) waits here and
 * is posted again once it has one; once the channel is closed such events are disposed of.
 */
final class LoopLink {

    private final BooleanSupplier closed;
    private final ConcurrentLinkedQueue<IoEvent> orphans = new ConcurrentLinkedQueue<>();
    private volatile RdmaIoHandler.Registration registration;
    /** What the loop returned for the registration; cancelling goes through it. */
    private IoRegistration ioRegistration;

    LoopLink(BooleanSupplier closed) {
        this.closed = closed;
    }

    /** Registers {@code handle}, runs {@code registered} on the loop, then completes {@code promise}. */
    void register(IoEventLoop loop, RdmaIoHandle handle, ChannelPromise promise, Runnable registered) {
        loop.register(handle).addListener(f -> {
            if (!f.isSuccess()) {
                promise.setFailure(f.cause());
                return;
            }
            ioRegistration = (IoRegistration) f.getNow();
            registration = ioRegistration.attachment();
            registered.run();
            IoEvent orphan;
            while ((orphan = orphans.poll()) != null) {
                post(orphan);
            }
            promise.setSuccess();
        });
    }

    void deregister() {
        IoRegistration r = ioRegistration;
        if (r != null) {
            ioRegistration = null;
            registration = null;
            r.cancel();
        }
    }

    boolean registered() {
        return registration != null;
    }

    /** The loop's handler; only while registered. */
    RdmaIoHandler handler() {
        return registration.handler();
    }

    /** From any thread: hands {@code event} to the loop the channel is registered with. */
    void post(IoEvent event) {
        RdmaIoHandler.Registration r = registration;
        if (r == null || !r.post(event)) {
            orphans.add(event);
            if (closed.getAsBoolean()) {
                discardOrphans();
            }
        }
    }

    void discardOrphans() {
        IoEvent e;
        while ((e = orphans.poll()) != null) {
            if (e instanceof RdmaEvent r) {
                r.discard();
            }
        }
    }
}
