package io.rdma4j.netty.reactor;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.netty.RdmaIoHandler;
import io.rdma4j.netty.RdmaServerSocketChannel;
import io.rdma4j.netty.RdmaSocketChannel;
import reactor.core.publisher.Mono;
import reactor.netty.resources.LoopResources;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Reactor Netty's loop resources on rdma4j: {@code HttpServer.create().runOn(loops)} and
 * {@code HttpClient.create().runOn(loops)} then serve and connect through rdma4j's channels. The loops run stream
 * channels only, so give an {@code HttpClient} a resolver that needs no datagram channel, e.g.
 * {@code .resolver(DefaultAddressResolverGroup.INSTANCE)} (the JDK's resolver).
 */
@SuppressWarnings("exports") // Reactor Netty's types: its applications read it themselves (requires static)
public final class RdmaLoopResources implements LoopResources {

    private final EventLoopGroup group;
    private final boolean owned;
    private final AtomicBoolean disposed = new AtomicBoolean();

    private RdmaLoopResources(EventLoopGroup group, boolean owned) {
        this.group = group;
        this.owned = owned;
    }

    /** Loops of {@code threads} event loops over {@code transport}; disposing them shuts the loops down, not the transport. */
    public static RdmaLoopResources create(RdmaTransport transport, int threads) {
        Objects.requireNonNull(transport, "transport");
        return new RdmaLoopResources(new MultiThreadIoEventLoopGroup(threads,
                new DefaultThreadFactory("rdma4j-reactor", true), RdmaIoHandler.newFactory(transport)), true);
    }

    /** Loops over a group of {@link RdmaIoHandler} event loops that the caller owns and shuts down. */
    public static RdmaLoopResources of(EventLoopGroup group) {
        return new RdmaLoopResources(Objects.requireNonNull(group, "group"), false);
    }

    @Override
    public EventLoopGroup onServer(boolean useNative) {
        return group;
    }

    @Override
    public EventLoopGroup onServerSelect(boolean useNative) {
        return group;
    }

    @Override
    public EventLoopGroup onClient(boolean useNative) {
        return group;
    }

    @Override
    public <CHANNEL extends Channel> CHANNEL onChannel(Class<CHANNEL> channelType, EventLoopGroup group) {
        Class<? extends CHANNEL> type = onChannelClass(channelType, group);
        try {
            return type.getConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot make a " + type.getName(), e);
        }
    }

    @Override
    @SuppressWarnings("unchecked")
    public <CHANNEL extends Channel> Class<? extends CHANNEL> onChannelClass(Class<CHANNEL> channelType, EventLoopGroup group) {
        if (channelType.isAssignableFrom(RdmaServerSocketChannel.class) && ServerSocketChannel.class.isAssignableFrom(channelType)) {
            return (Class<? extends CHANNEL>) RdmaServerSocketChannel.class;
        }
        if (channelType.isAssignableFrom(RdmaSocketChannel.class) && SocketChannel.class.isAssignableFrom(channelType)) {
            return (Class<? extends CHANNEL>) RdmaSocketChannel.class;
        }
        throw new IllegalArgumentException("rdma4j's event loops run socket channels only, not " + channelType.getName()
                + (channelType.getSimpleName().contains("Datagram") ? "; give the HttpClient a resolver that needs no"
                + " datagram channel: .resolver(DefaultAddressResolverGroup.INSTANCE)" : ""));
    }

    @Override
    public boolean isDisposed() {
        return disposed.get();
    }

    @Override
    public Mono<Void> disposeLater(Duration quietPeriod, Duration timeout) {
        return Mono.defer(() -> {
            if (!disposed.compareAndSet(false, true) || !owned) {
                return Mono.empty();
            }
            return Mono.create(sink -> group.shutdownGracefully(quietPeriod.toMillis(), timeout.toMillis(), TimeUnit.MILLISECONDS)
                    .addListener(f -> sink.success()));
        });
    }
}
