package io.rdma4j.kafka.protocol;

import io.rdma4j.core.ProtocolException;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The aborted transactions of a topic-partition that overlap an offset range, as the bodies of a
 * {@link io.rdma4j.core.RequestTypes#KAFKA_ABORTED_TRANSACTIONS} request and its reply: what a Kafka fetch
 * response carries for a {@code read_committed} consumer. A transaction overlaps {@code [fromOffset, toOffset)}
 * when its abort marker lies at or after {@code fromOffset} and its first offset before {@code toOffset}.
 */
public final class AbortedTransactions {

    /** Most transactions answered at once: their bytes fit the default 64 KiB message. */
    public static final int MAX_PER_RESPONSE = 2048;
    /** producerId(8) firstOffset(8) lastOffset(8). */
    static final int ENTRY_BYTES = 24;
    /** status(1) coveredUpTo(8) count(4). */
    static final int RESPONSE_HEADER_BYTES = 13;

    private AbortedTransactions() {
    }

    public enum Status {
        /** Transactions follow. */
        OK,
        /** The exporter does not export this partition. */
        UNKNOWN_PARTITION,
        /** The range starts below the exported log (deleted by retention) or in no exported segment. */
        OFFSET_NOT_EXPORTED,
        /** A segment of the range is being replaced or deleted right now; asking again later answers. */
        SEGMENTS_CHANGING,
        /**
         * The requester may not READ the topic (the exporter checks Kafka ACLs and the requester's delegation token
         * owner lacks READ, or it proved no token); the consumer fetches through Kafka, which tells it the same.
         */
        NOT_AUTHORIZED
    }

    /** How many transactions a reply may hold so that it fits {@code maxMessageSize} bytes. */
    public static int maxPerResponse(int maxMessageSize) {
        return Math.max(0, Math.min(MAX_PER_RESPONSE, (maxMessageSize - RESPONSE_HEADER_BYTES) / ENTRY_BYTES));
    }

    public record Request(String topic, int partition, long fromOffset, long toOffset) {
        public byte[] toBytes() {
            byte[] name = topic.getBytes(StandardCharsets.UTF_8);
            return ByteBuffer.allocate(2 + name.length + 4 + 8 + 8).putShort((short) name.length)
                    .put(name).putInt(partition).putLong(fromOffset).putLong(toOffset).array();
        }

        /** @throws ProtocolException for a truncated request or an empty or negative range */
        public static Request fromBytes(ByteBuffer in) {
            Request r;
            try {
                byte[] name = new byte[in.getShort() & 0xffff];
                in.get(name);
                r = new Request(new String(name, StandardCharsets.UTF_8), in.getInt(), in.getLong(), in.getLong());
            } catch (BufferUnderflowException e) {
                throw new ProtocolException("truncated rdma4j Kafka aborted-transactions request");
            }
            if (r.fromOffset < 0 || r.toOffset <= r.fromOffset) {
                throw new ProtocolException("aborted-transactions request for the range [" + r.fromOffset + ", " + r.toOffset
                        + "): it must be non-empty and non-negative");
            }
            return r;
        }
    }

    /** One aborted transaction: its producer, its first offset and the offset of its abort marker. */
    public record Aborted(long producerId, long firstOffset, long lastOffset) {
    }

    /**
     * @param coveredUpTo every aborted transaction overlapping {@code [fromOffset, coveredUpTo)} is in
     *                    {@code transactions}; it is the request's {@code toOffset} unless more transactions overlap
     *                    than one reply holds
     * @param transactions ordered by first offset
     */
    public record Response(Status status, long coveredUpTo, List<Aborted> transactions) {

        public static Response of(Status status) {
            return new Response(status, -1, List.of());
        }

        public byte[] toBytes() {
            ByteBuffer out = ByteBuffer.allocate(RESPONSE_HEADER_BYTES + transactions.size() * ENTRY_BYTES)
                    .put((byte) status.ordinal()).putLong(coveredUpTo).putInt(transactions.size());
            for (Aborted a : transactions) {
                out.putLong(a.producerId()).putLong(a.firstOffset()).putLong(a.lastOffset());
            }
            return out.array();
        }

        /**
         * Decodes the reply to {@code asked}, checking what the consumer relies on: the count fits the bytes and
         * the limit, every transaction has a producer id, ends at or after its start and overlaps the asked range,
         * transactions come in first-offset order, and {@code coveredUpTo} lies within the asked range.
         *
         * @throws ProtocolException for a reply no exporter sends
         */
        public static Response fromBytes(ByteBuffer in, Request asked) {
            try {
                int statusCode = in.get();
                if (statusCode < 0 || statusCode >= Status.values().length) {
                    throw new ProtocolException("unknown aborted-transactions status " + statusCode);
                }
                Status status = Status.values()[statusCode];
                long covered = in.getLong();
                int count = in.getInt();
                if (count < 0 || count > MAX_PER_RESPONSE || (long) count * ENTRY_BYTES != in.remaining()) {
                    throw new ProtocolException("aborted-transactions reply claims " + count + " transactions in "
                            + in.remaining() + " bytes (at most " + MAX_PER_RESPONSE + ")");
                }
                if (status != Status.OK) {
                    if (count != 0) {
                        throw new ProtocolException("aborted-transactions reply " + status + " carries " + count + " transactions");
                    }
                    return of(status);
                }
                if (covered < asked.fromOffset() || covered > asked.toOffset()) {
                    throw new ProtocolException("aborted transactions said to cover up to " + covered + ", outside the asked range ["
                            + asked.fromOffset() + ", " + asked.toOffset() + ")");
                }
                List<Aborted> out = new ArrayList<>(count);
                long previousFirst = Long.MIN_VALUE;
                for (int i = 0; i < count; i++) {
                    Aborted a = new Aborted(in.getLong(), in.getLong(), in.getLong());
                    if (a.producerId() < 0 || a.firstOffset() < 0 || a.lastOffset() < a.firstOffset()) {
                        throw new ProtocolException("malformed aborted transaction " + a);
                    }
                    if (a.lastOffset() < asked.fromOffset() || a.firstOffset() >= asked.toOffset()) {
                        throw new ProtocolException("aborted transaction " + a + " does not overlap the asked range ["
                                + asked.fromOffset() + ", " + asked.toOffset() + ")");
                    }
                    if (a.firstOffset() < previousFirst) {
                        throw new ProtocolException("aborted transactions out of first-offset order at " + a);
                    }
                    previousFirst = a.firstOffset();
                    out.add(a);
                }
                return new Response(status, covered, List.copyOf(out));
            } catch (BufferUnderflowException e) {
                throw new ProtocolException("truncated rdma4j Kafka aborted-transactions reply");
            }
        }
    }
}
