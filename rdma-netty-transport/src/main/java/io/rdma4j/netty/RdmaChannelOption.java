package io.rdma4j.netty;

import io.netty.channel.ChannelOption;

/** The options of this transport's channels beyond Netty's own. */
public final class RdmaChannelOption {

    /**
     * Whether a client channel whose peer does not run rdma4j (it answers rdma4j's handshake with something else,
     * closes on it, never answers it, or has no rdma4j listener) connects to the same address over plain TCP instead,
     * as rdma4j's Spark and Kafka integrations fall back to the framework's own path for such a peer; one log line
     * per peer says why. Default: true, unless the transport authenticates its peers (a shared secret or
     * {@code tcp.tls}), since plain TCP carries neither; a failed authentication never falls back.
     */
    public static final ChannelOption<Boolean> TCP_FALLBACK = ChannelOption.valueOf(RdmaChannelOption.class, "TCP_FALLBACK");

    private RdmaChannelOption() {
    }
}
