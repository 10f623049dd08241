package io.rdma4j.core.verbs;

import io.rdma4j.core.TransportConfig;

/**
 * How much memory a verbs connection registers for its two-sided messages, at given settings: its receive slots
 * (the data credits of {@code verbs.receive-depth} plus {@link MessageChannel#EXTRA_SLOTS} for credit-only messages)
 * and as many send staging slots, each the {@link MessageChannel#HEADER} plus {@code max-message-size}. The
 * connection sizes its buffers from here, and the doctor's memlock advice reads the same numbers.
 */
public record MessageBufferSizing(int slots, int slotSize) {

    /** @throws IllegalArgumentException for a bad {@code verbs.*} option */
    public static MessageBufferSizing of(TransportConfig config) {
        return of(config, VerbsOptions.from(config));
    }

    static MessageBufferSizing of(TransportConfig config, VerbsOptions options) {
        return new MessageBufferSizing(options.receiveDepth() + MessageChannel.EXTRA_SLOTS,
                MessageChannel.HEADER + config.maxMessageSize());
    }

    /** The settings that give these numbers, as a user sets them. */
    public String settings() {
        return "verbs.receive-depth " + (slots - MessageChannel.EXTRA_SLOTS) + ", max-message-size "
                + (slotSize - MessageChannel.HEADER) + " B";
    }

    /** Registered bytes per connection: its receive and its send slots. */
    public long bytesPerConnection() {
        return 2L * slots * slotSize;
    }
}
