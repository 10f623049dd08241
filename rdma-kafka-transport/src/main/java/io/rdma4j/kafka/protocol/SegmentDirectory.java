package io.rdma4j.kafka.protocol;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RegionDescriptor;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The exporter's segment directory, as the bodies of a {@link io.rdma4j.core.RequestTypes#KAFKA_DIRECTORY}
 * request and its reply: a consumer asks for the segments of a topic-partition from an offset and gets their
 * region descriptors, base offsets and exported lengths, the byte position of the batch holding that offset,
 * and the watermark region with the watermark it held as the directory was made.
 */
public final class SegmentDirectory {

    /** Most segments answered at once, so a response fits the default 64 KiB message. */
    public static final int MAX_SEGMENTS_PER_RESPONSE = 256;

    private SegmentDirectory() {
    }

    public enum Status {
        /** Segments follow. */
        OK,
        /** The exporter does not export this partition (not on this broker, or not found yet). */
        UNKNOWN_PARTITION,
        /** The offset lies below the exported log (deleted by retention) or in no exported segment. */
        OFFSET_NOT_EXPORTED,
        /**
         * The requester may not READ the topic (the exporter checks Kafka ACLs and the requester's delegation token
         * owner lacks READ, or it proved no token); the consumer fetches through Kafka, which tells it the same.
         */
        NOT_AUTHORIZED
    }

    /**
     * @param fromOffset an offset, or {@link #EARLIEST} / {@link #LATEST}: from the log start or the high watermark
     *                   of the watermark the reply carries (a consumer still waiting for its offset reset asks for
     *                   where the reset will go; {@link #resolve} tells which offset the reply then serves)
     */
    public record Request(String topic, int partition, long fromOffset) {

        /** From the log start, as Kafka's {@code ListOffsets} earliest. */
        public static final long EARLIEST = -2;
        /** From the high watermark, as Kafka's {@code ListOffsets} latest for a read_uncommitted consumer. */
        public static final long LATEST = -1;

        /**
         * The offset a directory asked from {@code fromOffset} starts at, by the watermark {@code published} with it:
         * the offset itself, the log start for {@link #EARLIEST}, the high watermark for {@link #LATEST}; -1 where
         * none (no watermark, or another negative offset, which no segment holds).
         */
        public static long resolve(long fromOffset, Watermark published) {
            if (fromOffset >= 0) {
                return fromOffset;
            }
            if (published == null) {
                return -1;
            }
            return fromOffset == EARLIEST ? published.logStartOffset() : fromOffset == LATEST ? published.highWatermark() : -1;
        }

        public byte[] toBytes() {
            byte[] name = topic.getBytes(StandardCharsets.UTF_8);
            return ByteBuffer.allocate(2 + name.length + 4 + 8).putShort((short) name.length)
                    .put(name).putInt(partition).putLong(fromOffset).array();
        }

        public static Request fromBytes(ByteBuffer in) {
            try {
                byte[] name = new byte[in.getShort() & 0xffff];
                in.get(name);
                return new Request(new String(name, StandardCharsets.UTF_8), in.getInt(), in.getLong());
            } catch (java.nio.BufferUnderflowException e) {
                throw new ProtocolException("truncated rdma4j Kafka directory request");
            }
        }
    }

    /**
     * One exported segment.
     *
     * @param exportedLength bytes registered (never past the file's end when it was mapped)
     * @param complete       the segment was rolled and is exported in full: it will not grow
     */
    public record Segment(long baseOffset, long exportedLength, boolean complete, RegionDescriptor region) {
    }

    /**
     * @param startPosition byte position, in the first segment, of the batch holding the requested offset
     *                      (or of the first batch after it); -1 when not OK
     * @param watermark     the record in {@code watermarkRegion} as the directory was made (under the same lock, so
     *                      consistent with the segments), which spares a new cursor its first watermark READ; null when
     *                      not OK, or from an exporter that does not send it (it is then read). Sent after the
     *                      segments, where consumers that do not know it stop reading.
     */
    public record Response(Status status, RegionDescriptor watermarkRegion, long startPosition, List<Segment> segments,
                           Watermark watermark) {

        public Response(Status status, RegionDescriptor watermarkRegion, long startPosition, List<Segment> segments) {
            this(status, watermarkRegion, startPosition, segments, null);
        }

        public byte[] toBytes() {
            int size = 1 + 1 + (watermarkRegion == null ? 0 : RegionDescriptor.SERIALIZED_SIZE) + 8 + 4
                    + segments.size() * (8 + 8 + 1 + RegionDescriptor.SERIALIZED_SIZE) + 1 + (watermark == null ? 0 : Watermark.SIZE);
            ByteBuffer out = ByteBuffer.allocate(size).put((byte) status.ordinal());
            out.put((byte) (watermarkRegion == null ? 0 : 1));
            if (watermarkRegion != null) {
                out.put(watermarkRegion.toBytes());
            }
            out.putLong(startPosition).putInt(segments.size());
            for (Segment s : segments) {
                out.putLong(s.baseOffset()).putLong(s.exportedLength()).put((byte) (s.complete() ? 1 : 0)).put(s.region().toBytes());
            }
            out.put((byte) (watermark == null ? 0 : 1));
            if (watermark != null) {
                byte[] record = new byte[Watermark.SIZE];
                watermark.writeTo(MemorySegment.ofArray(record));
                out.put(record);
            }
            return out.array();
        }

        /**
         * Checks what a consumer sizes reads by: an OK response has a watermark region holding a watermark record,
         * segments in increasing base offset order whose exported lengths lie within their regions, and a start
         * position within the first segment.
         *
         * @throws ProtocolException for a response no exporter sends
         */
        void check() {
            if (status != Status.OK) {
                if (watermark != null) {
                    throw new ProtocolException("directory response " + status + " with a watermark");
                }
                return;
            }
            if (watermarkRegion == null || watermarkRegion.length() < Watermark.SIZE) {
                throw new ProtocolException("directory response without a watermark region of at least " + Watermark.SIZE
                        + " bytes");
            }
            long previousBase = -1;
            for (Segment s : segments) {
                if (s.baseOffset() <= previousBase) {
                    throw new ProtocolException("directory segments out of order: base offset " + s.baseOffset() + " after "
                            + previousBase);
                }
                if (s.exportedLength() < 0 || s.exportedLength() > s.region().length()) {
                    throw new ProtocolException("segment " + s.baseOffset() + " claims " + s.exportedLength()
                            + " exported bytes in a region of " + s.region().length());
                }
                previousBase = s.baseOffset();
            }
            if (!segments.isEmpty() && (startPosition < 0 || startPosition > segments.getFirst().exportedLength())) {
                throw new ProtocolException("directory start position " + startPosition + " lies outside the first segment's "
                        + segments.getFirst().exportedLength() + " exported bytes");
            }
        }

        public static Response fromBytes(ByteBuffer in) {
            try {
                int statusCode = in.get();
                if (statusCode < 0 || statusCode >= Status.values().length) {
                    throw new ProtocolException("unknown directory status " + statusCode);
                }
                RegionDescriptor watermark = in.get() == 1 ? RegionDescriptor.fromBytes(in) : null;
                long start = in.getLong();
                int count = in.getInt();
                if (count < 0 || count > MAX_SEGMENTS_PER_RESPONSE) {
                    throw new ProtocolException("bad segment count " + count);
                }
                List<Segment> segments = new ArrayList<>(count);
                for (int i = 0; i < count; i++) {
                    long base = in.getLong();
                    long length = in.getLong();
                    boolean complete = in.get() == 1;
                    segments.add(new Segment(base, length, complete, RegionDescriptor.fromBytes(in)));
                }
                Watermark held = null;
                int carried = in.hasRemaining() ? in.get() : 0;
                if (carried != 0 && carried != 1) {
                    throw new ProtocolException("bad directory watermark flag " + carried);
                }
                if (carried == 1) {
                    byte[] record = new byte[Watermark.SIZE];
                    in.get(record);
                    held = Watermark.readFrom(MemorySegment.ofArray(record));
                    if (held == null) {
                        throw new ProtocolException("directory response with a watermark that fails its checksum");
                    }
                }
                Response r = new Response(Status.values()[statusCode], watermark, start, List.copyOf(segments), held);
                r.check();
                return r;
            } catch (java.nio.BufferUnderflowException | IllegalArgumentException e) {
                throw new ProtocolException("malformed rdma4j Kafka directory response: " + e.getMessage());
            }
        }
    }
}
