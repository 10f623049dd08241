package io.rdma4j.spark;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RegionDescriptor;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class DescribeMapOutputsTest {

    private static RegionDescriptor region(long address, long length) {
        return new RegionDescriptor("tcp", address, length, 42L + address, Access.remoteRead());
    }

    @Test
    void requestAndReplyRoundTrip() {
        DescribeMapOutputs.Request request = DescribeMapOutputs.decodeRequest(DescribeMapOutputs.encodeRequest(7, new long[] {3, 9, 11}));
        assertThat(request.shuffleId()).isEqualTo(7);
        assertThat(request.mapIds()).containsExactly(3, 9, 11);

        List<DescribeMapOutputs.MapOutput> outputs = List.of(
                new DescribeMapOutputs.MapOutput(3, true, region(1, 80), region(2, 5000), region(3, 72)),
                new DescribeMapOutputs.MapOutput(9, true, region(4, 80), null, null),
                DescribeMapOutputs.MapOutput.missing(11),
                DescribeMapOutputs.MapOutput.notServed(12));
        List<DescribeMapOutputs.MapOutput> decoded = DescribeMapOutputs.decodeReply(DescribeMapOutputs.encodeReply(outputs),
                new long[] {3, 9, 11, 12});
        assertThat(decoded).isEqualTo(outputs);
        assertThat(decoded.get(2).notServed()).as("missing: the files are gone").isFalse();
        assertThat(decoded.get(3).notServed()).as("not served: the files are there, Spark serves them").isTrue();
    }

    @Test
    void aFullRequestsReplyFitsOneMessage() {
        int maxMessage = 65536;
        int maps = DescribeMapOutputs.maxMapsPerRequest(maxMessage);
        List<DescribeMapOutputs.MapOutput> outputs = java.util.stream.LongStream.range(0, maps)
                .mapToObj(id -> new DescribeMapOutputs.MapOutput(id, true, region(1, 8), region(2, 8), region(3, 8))).toList();
        assertThat(DescribeMapOutputs.encodeReply(outputs).remaining()).isLessThanOrEqualTo(maxMessage);
        assertThat(DescribeMapOutputs.encodeRequest(1, new long[maps]).remaining()).isLessThanOrEqualTo(maxMessage);
    }

    @Test
    void garbageIsRejected() {
        assertThatThrownBy(() -> DescribeMapOutputs.decodeRequest(ByteBuffer.wrap(new byte[7]))).isInstanceOf(ProtocolException.class);
        ByteBuffer lying = DescribeMapOutputs.encodeRequest(1, new long[] {1, 2});
        lying.putInt(4, 5);
        assertThatThrownBy(() -> DescribeMapOutputs.decodeRequest(lying)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("announces 5 maps");
    }

    @Test
    void malformedRepliesAreProtocolExceptions() {
        assertThatThrownBy(() -> DescribeMapOutputs.decodeReply(ByteBuffer.wrap(new byte[3]), new long[] {1})).isInstanceOf(ProtocolException.class);
        assertThatThrownBy(() -> DescribeMapOutputs.decodeReply(ByteBuffer.allocate(4).putInt(0, 1000), new long[1000]))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("announces 1000 maps");
        ByteBuffer truncated = DescribeMapOutputs.encodeReply(List.of(new DescribeMapOutputs.MapOutput(3, true, region(1, 80), null, null)));
        ByteBuffer cut = truncated.slice(0, truncated.remaining() - 10);
        assertThatThrownBy(() -> DescribeMapOutputs.decodeReply(cut, new long[] {3})).isInstanceOf(ProtocolException.class);
    }
}
