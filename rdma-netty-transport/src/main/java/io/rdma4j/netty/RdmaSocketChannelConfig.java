package io.rdma4j.netty;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannelConfig;

import java.util.Map;

import static io.netty.channel.ChannelOption.ALLOW_HALF_CLOSURE;
import static io.netty.channel.ChannelOption.IP_TOS;
import static io.netty.channel.ChannelOption.SO_KEEPALIVE;
import static io.netty.channel.ChannelOption.SO_LINGER;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;
import static io.netty.channel.ChannelOption.SO_SNDBUF;
import static io.netty.channel.ChannelOption.TCP_NODELAY;

/**
 * The options of an {@link RdmaSocketChannel}. Besides Netty's generic ones (allocator, auto-read, write water marks,
 * connect timeout, ...) these apply: {@code ALLOW_HALF_CLOSURE}; {@code SO_LINGER} (0 closes at once and the peer
 * sees a reset; otherwise a close waits for the sends already handed to rdma4j, at most that many seconds when
 * positive, else up to rdma4j's operation timeout, and the peer sees an orderly end); {@code SO_SNDBUF}, the bytes
 * handed to rdma4j whose sends have not completed yet (0: {@value #DEFAULT_SEND_WINDOW} bytes, at least four times
 * max-message-size), beyond which writes wait in the channel's outbound buffer, so writability follows them;
 * {@link RdmaChannelOption#TCP_FALLBACK}.
 *
 * <p>The TCP socket options are accepted so that code written for socket channels runs unchanged, and have no effect:
 * rdma4j sends every message at once ({@code TCP_NODELAY} reads true), keeps connections alive and bounds what a
 * peer may queue itself ({@code tcp.idle-timeout}, {@code tcp.max-inbox-bytes}, {@code verbs.receive-depth}).
 */
public final class RdmaSocketChannelConfig extends DefaultChannelConfig implements SocketChannelConfig {

    /**
     * The send window unless {@code SO_SNDBUF} sets one: as much as Linux lets a socket's send buffer grow by default
     * ({@code tcp_wmem}), so a stream keeps the connection busy while the loop learns of room and refills the window.
     * The bytes are the application's buffers, held until sent, which would otherwise wait in the outbound buffer.
     */
    public static final int DEFAULT_SEND_WINDOW = 4 << 20;

    private volatile boolean allowHalfClosure;
    private volatile int soLinger = -1;
    private volatile int sendBufferSize;
    /** Null: the transport's default, see {@link RdmaChannelOption#TCP_FALLBACK}. */
    private volatile Boolean tcpFallback;

    RdmaSocketChannelConfig(RdmaSocketChannel channel) {
        super(channel);
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), ALLOW_HALF_CLOSURE, SO_LINGER, SO_SNDBUF, SO_RCVBUF, TCP_NODELAY,
                SO_KEEPALIVE, SO_REUSEADDR, IP_TOS, RdmaChannelOption.TCP_FALLBACK);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> T getOption(ChannelOption<T> option) {
        if (option == ALLOW_HALF_CLOSURE) {
            return (T) Boolean.valueOf(isAllowHalfClosure());
        } else if (option == SO_LINGER) {
            return (T) Integer.valueOf(getSoLinger());
        } else if (option == SO_SNDBUF) {
            return (T) Integer.valueOf(getSendBufferSize());
        } else if (option == SO_RCVBUF) {
            return (T) Integer.valueOf(getReceiveBufferSize());
        } else if (option == TCP_NODELAY) {
            return (T) Boolean.valueOf(isTcpNoDelay());
        } else if (option == SO_KEEPALIVE) {
            return (T) Boolean.valueOf(isKeepAlive());
        } else if (option == SO_REUSEADDR) {
            return (T) Boolean.valueOf(isReuseAddress());
        } else if (option == IP_TOS) {
            return (T) Integer.valueOf(getTrafficClass());
        } else if (option == RdmaChannelOption.TCP_FALLBACK) {
            return (T) tcpFallback;
        }
        return super.getOption(option);
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == ALLOW_HALF_CLOSURE) {
            setAllowHalfClosure((Boolean) value);
        } else if (option == SO_LINGER) {
            setSoLinger((Integer) value);
        } else if (option == SO_SNDBUF) {
            setSendBufferSize((Integer) value);
        } else if (option == RdmaChannelOption.TCP_FALLBACK) {
            tcpFallback = (Boolean) value;
        } else if (option == SO_RCVBUF || option == TCP_NODELAY || option == SO_KEEPALIVE || option == SO_REUSEADDR
                || option == IP_TOS) {
            return true; // accepted, no effect (see the class comment)
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    /** {@link RdmaChannelOption#TCP_FALLBACK} as set, null for the transport's default. */
    Boolean tcpFallback() {
        return tcpFallback;
    }

    @Override
    public boolean isAllowHalfClosure() {
        return allowHalfClosure;
    }

    @Override
    public RdmaSocketChannelConfig setAllowHalfClosure(boolean allowHalfClosure) {
        this.allowHalfClosure = allowHalfClosure;
        return this;
    }

    @Override
    public int getSoLinger() {
        return soLinger;
    }

    @Override
    public RdmaSocketChannelConfig setSoLinger(int soLinger) {
        this.soLinger = soLinger < 0 ? -1 : soLinger;
        return this;
    }

    /** The send window; 0 means {@link #DEFAULT_SEND_WINDOW}. */
    @Override
    public int getSendBufferSize() {
        return sendBufferSize;
    }

    @Override
    public RdmaSocketChannelConfig setSendBufferSize(int sendBufferSize) {
        if (sendBufferSize < 0) {
            throw new IllegalArgumentException("SO_SNDBUF must not be negative, got " + sendBufferSize);
        }
        this.sendBufferSize = sendBufferSize;
        return this;
    }

    /** Not applicable: rdma4j bounds what a peer may queue (0). */
    @Override
    public int getReceiveBufferSize() {
        return 0;
    }

    @Override
    public RdmaSocketChannelConfig setReceiveBufferSize(int receiveBufferSize) {
        return this;
    }

    @Override
    public boolean isTcpNoDelay() {
        return true;
    }

    @Override
    public RdmaSocketChannelConfig setTcpNoDelay(boolean tcpNoDelay) {
        return this;
    }

    @Override
    public boolean isKeepAlive() {
        return false;
    }

    @Override
    public RdmaSocketChannelConfig setKeepAlive(boolean keepAlive) {
        return this;
    }

    @Override
    public int getTrafficClass() {
        return 0;
    }

    @Override
    public RdmaSocketChannelConfig setTrafficClass(int trafficClass) {
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return true;
    }

    @Override
    public RdmaSocketChannelConfig setReuseAddress(boolean reuseAddress) {
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setConnectTimeoutMillis(int connectTimeoutMillis) {
        super.setConnectTimeoutMillis(connectTimeoutMillis);
        return this;
    }

    @Override
    @Deprecated
    public RdmaSocketChannelConfig setMaxMessagesPerRead(int maxMessagesPerRead) {
        super.setMaxMessagesPerRead(maxMessagesPerRead);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteSpinCount(int writeSpinCount) {
        super.setWriteSpinCount(writeSpinCount);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAllocator(ByteBufAllocator allocator) {
        super.setAllocator(allocator);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator allocator) {
        super.setRecvByteBufAllocator(allocator);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAutoRead(boolean autoRead) {
        super.setAutoRead(autoRead);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAutoClose(boolean autoClose) {
        super.setAutoClose(autoClose);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setMessageSizeEstimator(MessageSizeEstimator estimator) {
        super.setMessageSizeEstimator(estimator);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark writeBufferWaterMark) {
        super.setWriteBufferWaterMark(writeBufferWaterMark);
        return this;
    }

    @Override
    protected void autoReadCleared() {
        ((RdmaSocketChannel) channel).autoReadCleared();
    }
}
