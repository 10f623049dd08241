package io.rdma4j.spark;

import io.rdma4j.core.Access;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RegionDescriptor;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class DescribeProtocolTest {

    private static RegionDescriptor region(long address, long length) {
        return new RegionDescriptor("tcp", address, length, 42L + address, Access.remoteRead());
    }

    @Test
    void requestAndReplyRoundTrip() {
        DescribeProtocol.Request request = DescribeProtocol.decodeRequest(DescribeProtocol.encodeRequest(7, new long[] {3, 9, 11}));
        assertThat(request.shuffleId()).isEqualTo(7);
        assertThat(request.mapIds()).containsExactly(3, 9, 11);

        List<DescribeProtocol.MapOutput> outputs = List.of(
                new DescribeProtocol.MapOutput(3, true, region(1, 80), region(2, 5000), region(3, 72)),
                new DescribeProtocol.MapOutput(9, true, region(4, 80), null, null),
                DescribeProtocol.MapOutput.missing(11));
        assertThat(DescribeProtocol.decodeReply(DescribeProtocol.encodeReply(outputs))).isEqualTo(outputs);
    }

    @Test
    void aFullRequestsReplyFitsOneMessage() {
        int maxMessage = 65536;
        int maps = DescribeProtocol.maxMapsPerRequest(maxMessage);
        List<DescribeProtocol.MapOutput> outputs = java.util.stream.LongStream.range(0, maps)
                .mapToObj(id -> new DescribeProtocol.MapOutput(id, true, region(1, 8), region(2, 8), region(3, 8))).toList();
        assertThat(DescribeProtocol.encodeReply(outputs).remaining()).isLessThanOrEqualTo(maxMessage);
        assertThat(DescribeProtocol.encodeRequest(1, new long[maps]).remaining()).isLessThanOrEqualTo(maxMessage);
    }

    @Test
    void garbageIsRejected() {
        assertThatThrownBy(() -> DescribeProtocol.decodeRequest(ByteBuffer.wrap(new byte[16]))).isInstanceOf(ProtocolException.class);
        ByteBuffer lying = DescribeProtocol.encodeRequest(1, new long[] {1, 2});
        lying.putInt(8, 5);
        assertThatThrownBy(() -> DescribeProtocol.decodeRequest(lying)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("announces 5 maps");
    }
}
