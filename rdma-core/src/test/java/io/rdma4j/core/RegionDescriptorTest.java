package io.rdma4j.core;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.EnumSet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RegionDescriptorTest {

    private final RegionDescriptor d = new RegionDescriptor("tcp", 0x7f00_0000_1000L, 4096, 0x1234_5678_9abc_def0L,
            EnumSet.of(Access.REMOTE_READ, Access.REMOTE_WRITE));

    @Test
    void roundTripsThroughItsByteForm() {
        byte[] bytes = d.toBytes();
        assertThat(bytes).hasSize(RegionDescriptor.SERIALIZED_SIZE);
        assertThat(RegionDescriptor.fromBytes(bytes)).isEqualTo(d);
        ByteBuffer twoInARow = ByteBuffer.allocate(2 * RegionDescriptor.SERIALIZED_SIZE).put(bytes).put(bytes).flip();
        assertThat(RegionDescriptor.fromBytes(twoInARow)).isEqualTo(d);
        assertThat(twoInARow.position()).isEqualTo(RegionDescriptor.SERIALIZED_SIZE);
        assertThat(RegionDescriptor.fromBytes(twoInARow)).isEqualTo(d);
    }

    @Test
    void rejectsBytesThatAreNotADescriptor() {
        byte[] bytes = d.toBytes();
        assertThatThrownBy(() -> RegionDescriptor.fromBytes(new byte[10])).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("needs 40 bytes");
        byte[] badMagic = bytes.clone();
        badMagic[0] = 0;
        assertThatThrownBy(() -> RegionDescriptor.fromBytes(badMagic)).hasMessageContaining("magic");
        byte[] badVersion = bytes.clone();
        badVersion[4] = 9;
        assertThatThrownBy(() -> RegionDescriptor.fromBytes(badVersion)).hasMessageContaining("version 9");
        byte[] badName = bytes.clone();
        badName[6] = 0;
        assertThatThrownBy(() -> RegionDescriptor.fromBytes(badName)).hasMessageContaining("name length");
    }

    @Test
    void checksRangesIncludingOverflow() {
        d.checkRange(0, 4096);
        d.checkRange(4096, 0);
        assertThatThrownBy(() -> d.checkRange(1, 4096)).isInstanceOf(RemoteAccessException.class)
                .satisfies(e -> assertThat(((RemoteAccessException) e).reason()).isEqualTo(RemoteAccessException.Reason.OUT_OF_RANGE));
        assertThatThrownBy(() -> d.checkRange(-1, 1)).isInstanceOf(RemoteAccessException.class);
        assertThatThrownBy(() -> d.checkRange(Long.MAX_VALUE, 2)).isInstanceOf(RemoteAccessException.class).hasMessageContaining("overflows");
    }

    @Test
    void slicesKeepKeyAndRights() {
        RegionDescriptor s = d.slice(100, 200);
        assertThat(s.address()).isEqualTo(d.address() + 100);
        assertThat(s.length()).isEqualTo(200);
        assertThat(s.key()).isEqualTo(d.key());
        assertThat(s.access()).isEqualTo(d.access());
        assertThatThrownBy(() -> d.slice(4000, 200)).isInstanceOf(RemoteAccessException.class);
    }

    @Test
    void neverPrintsTheKey() {
        assertThat(d.toString()).doesNotContain(Long.toHexString(d.key())).doesNotContain(Long.toString(d.key()));
    }
}
