package io.rdma4j.core.verbs;

import io.rdma4j.core.TransportConfig;

/**
 * How much memory the verbs provider registers for two-sided messages at given settings, for a number of connections:
 * its shared receive queue ({@link ReceivePool}: each connection's reserved slots and the pool lent to busy ones) and
 * its send staging slots ({@link StagingPool}: as many as fragments are in flight at once, estimated here at every
 * connection's reserved credits and the pool), registered {@link SlotChunks#CHUNK_SLOTS} slots at a time. The
 * provider sizes its pools from the same numbers, and the doctor's memlock advice reads them.
 *
 * @param receiveSlotSize one receive slot: a fragment of at most 4 KiB, less for a smaller {@code max-message-size}
 * @param stagingSlotSize one send staging slot: a full fragment
 */
public record MessageBufferSizing(int receiveSlotSize, int stagingSlotSize) {

    /** @throws IllegalArgumentException for a bad {@code verbs.*} option */
    public static MessageBufferSizing of(TransportConfig config) {
        VerbsOptions.from(config);
        return new MessageBufferSizing(MessageChannel.slotSize(config.maxMessageSize()),
                MessageChannel.HEADER + MessageChannel.FRAGMENT_PAYLOAD);
    }

    /** Registered bytes for {@code connections} connections, each sending its reserved credits' worth at once. */
    public long bytesFor(int connections) {
        long staging = (long) connections * ReceivePool.RESERVED_CREDITS + ReceivePool.SHARED_CREDITS;
        return chunked(ReceivePool.slotsFor(connections)) * receiveSlotSize + chunked(staging) * stagingSlotSize;
    }

    /** What one more connection adds, on average: its reserved receive slots and staging slots. */
    public long bytesPerConnection() {
        return (long) (ReceivePool.RESERVED_CREDITS + ReceivePool.CONTROL_SLOTS) * receiveSlotSize
                + (long) ReceivePool.RESERVED_CREDITS * stagingSlotSize;
    }

    /** The most connections {@code bytes} of registered memory holds (0 when not even the shared pools fit). */
    public int connectionsWithin(long bytes) {
        int low = 0;
        int high = ReceivePool.MAX_DEPTH;
        if (bytesFor(0) > bytes) {
            return 0;
        }
        while (low < high) {
            int mid = (low + high + 1) >>> 1;
            if (bytesFor(mid) <= bytes) {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        return low;
    }

    /** The settings that give these numbers, as a user reads them. */
    public String settings() {
        return "receive slots of " + receiveSlotSize + " B, " + (ReceivePool.RESERVED_CREDITS + ReceivePool.CONTROL_SLOTS)
                + " reserved per connection and " + (ReceivePool.slotsFor(0)) + " shared";
    }

    private static long chunked(long slots) {
        return (slots + SlotChunks.CHUNK_SLOTS - 1) / SlotChunks.CHUNK_SLOTS * SlotChunks.CHUNK_SLOTS;
    }
}
