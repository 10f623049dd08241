package io.rdma4j.kafka.protocol;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RegionDescriptor;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class SegmentDirectoryTest {

    private static final RegionDescriptor WATERMARK_REGION = new RegionDescriptor("tcp", 0x1000, Watermark.SIZE, 7, Access.remoteRead());
    private static final RegionDescriptor SEGMENT_REGION = new RegionDescriptor("tcp", 0x8000, 4096, 9, Access.remoteRead());
    private static final Watermark WATERMARK = new Watermark(60, 50, 300, 0, 55, 50, 3, 1234, 2);
    private static final List<SegmentDirectory.Segment> SEGMENTS = List.of(new SegmentDirectory.Segment(50, 400, false, SEGMENT_REGION));

    @Test
    void aResponseCarriesTheWatermarkAfterItsSegments() {
        var sent = new SegmentDirectory.Response(SegmentDirectory.Status.OK, WATERMARK_REGION, 0, SEGMENTS, WATERMARK);
        assertThat(SegmentDirectory.Response.fromBytes(ByteBuffer.wrap(sent.toBytes()))).isEqualTo(sent);

        var without = new SegmentDirectory.Response(SegmentDirectory.Status.OK, WATERMARK_REGION, 0, SEGMENTS);
        assertThat(SegmentDirectory.Response.fromBytes(ByteBuffer.wrap(without.toBytes())).watermark()).isNull();
    }

    @Test
    void aResponseEndingAfterItsSegmentsHasNoWatermarkAndAReaderThatStopsThereReadsTheRest() {
        var sent = new SegmentDirectory.Response(SegmentDirectory.Status.OK, WATERMARK_REGION, 0, SEGMENTS, WATERMARK);
        byte[] bytes = sent.toBytes();
        byte[] older = Arrays.copyOf(bytes, bytes.length - 1 - Watermark.SIZE); // as an exporter without it sends
        var parsed = SegmentDirectory.Response.fromBytes(ByteBuffer.wrap(older));
        assertThat(parsed.watermark()).isNull();
        assertThat(parsed.segments()).isEqualTo(SEGMENTS);
    }

    @Test
    void aWatermarkThatFailsItsChecksumOrComesWithARefusalOrABadFlagIsRefused() {
        byte[] bytes = new SegmentDirectory.Response(SegmentDirectory.Status.OK, WATERMARK_REGION, 0, SEGMENTS, WATERMARK).toBytes();
        bytes[bytes.length - Watermark.SIZE + 8] ^= 1; // the high watermark's first byte
        assertThatThrownBy(() -> SegmentDirectory.Response.fromBytes(ByteBuffer.wrap(bytes)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("checksum");

        byte[] cut = Arrays.copyOf(new SegmentDirectory.Response(SegmentDirectory.Status.OK, WATERMARK_REGION, 0, SEGMENTS, WATERMARK)
                .toBytes(), bytes.length - 10);
        assertThatThrownBy(() -> SegmentDirectory.Response.fromBytes(ByteBuffer.wrap(cut))).isInstanceOf(ProtocolException.class);

        byte[] refusedWithOne = new SegmentDirectory.Response(SegmentDirectory.Status.NOT_AUTHORIZED, null, -1, List.of(), WATERMARK)
                .toBytes();
        assertThatThrownBy(() -> SegmentDirectory.Response.fromBytes(ByteBuffer.wrap(refusedWithOne)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("NOT_AUTHORIZED with a watermark");

        byte[] without = new SegmentDirectory.Response(SegmentDirectory.Status.OK, WATERMARK_REGION, 0, SEGMENTS).toBytes();
        without[without.length - 1] = 2; // the flag byte: neither "none" nor "one follows"
        assertThatThrownBy(() -> SegmentDirectory.Response.fromBytes(ByteBuffer.wrap(without)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("flag");
    }
}
