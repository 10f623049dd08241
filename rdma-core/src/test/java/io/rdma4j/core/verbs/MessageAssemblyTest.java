package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class MessageAssemblyTest {

    private static final int MORE = MessageChannel.FLAG_DATA | MessageChannel.FLAG_MORE;

    @Test
    void aMessageInOneFragmentIsThatFragment() {
        MessageAssembly assembly = new MessageAssembly(100);
        ByteBuffer bytes = ByteBuffer.wrap(new byte[] {1, 2, 3});
        MessageChannel.Received r = assembly.add(new MessageChannel.Fragment(3, MessageChannel.FLAG_DATA, bytes));
        assertThat(r.complete()).isTrue();
        assertThat(r.payload()).isSameAs(bytes);
        assertThat(r.returnedCredits()).isEqualTo(3);
    }

    @Test
    void fragmentsArePutTogetherInOrderAndTheNextMessageStartsAfresh() {
        MessageAssembly assembly = new MessageAssembly(10_000);
        assertThat(assembly.add(fragment(MORE, 4088, (byte) 1))).isSameAs(MessageChannel.Received.PARTIAL);
        assertThat(assembly.add(fragment(MORE | MessageChannel.FLAG_BACKLOG, 4088, (byte) 2)).complete()).isFalse();
        MessageChannel.Received whole = assembly.add(fragment(MessageChannel.FLAG_DATA, 100, (byte) 3));
        assertThat(whole.complete()).isTrue();
        ByteBuffer p = whole.payload();
        assertThat(p.remaining()).isEqualTo(4088 + 4088 + 100);
        assertThat(p.get(0)).isEqualTo((byte) 1);
        assertThat(p.get(4088)).isEqualTo((byte) 2);
        assertThat(p.get(8176)).isEqualTo((byte) 3);
        assertThat(assembly.add(fragment(MessageChannel.FLAG_DATA, 5, (byte) 4)).payload().remaining()).isEqualTo(5);
    }

    @Test
    void aPeerCannotGrowAMessageBeyondThisSidesMaxMessageSize() {
        MessageAssembly assembly = new MessageAssembly(5000);
        assembly.add(fragment(MORE, 4088, (byte) 1));
        assertThatThrownBy(() -> assembly.add(fragment(MORE, 4088, (byte) 1))).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("over this side's max-message-size of 5000");
    }

    @Test
    void aProofInsideAMessageIsRefused() {
        MessageAssembly assembly = new MessageAssembly(10_000);
        assembly.add(fragment(MORE, 10, (byte) 1));
        assertThatThrownBy(() -> assembly.add(fragment(MessageChannel.FLAG_PROOF, 32, (byte) 1)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("proof of the shared secret inside a message");
    }

    @Test
    void fragmentFlagsAreCheckedBeforeTheirBytesAreTrusted() {
        int slot = MessageChannel.HEADER + MessageChannel.FRAGMENT_PAYLOAD;
        for (int flag : new int[] {MORE, MORE | MessageChannel.FLAG_BACKLOG, MessageChannel.FLAG_BACKLOG,
                MessageChannel.FLAG_PROOF | MessageChannel.FLAG_BACKLOG}) {
            assertThatCode(() -> MessageChannel.checkLength(slot, flag, slot)).doesNotThrowAnyException();
        }
        for (int flag : new int[] {MessageChannel.FLAG_PROOF | MessageChannel.FLAG_MORE, MessageChannel.FLAG_CREDIT
                | MessageChannel.FLAG_BACKLOG, 0x400, MORE | 0x800}) {
            assertThatThrownBy(() -> MessageChannel.checkLength(MessageChannel.HEADER, flag, slot))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("unknown flag " + flag);
        }
    }

    @Test
    void slotsHoldOneFragmentOrTheLargestMessageIfSmaller() {
        assertThat(MessageChannel.slotSize(1 << 20)).isEqualTo(4096);
        assertThat(MessageChannel.slotSize(100)).isEqualTo(108);
        assertThat(MessageChannel.fragmentPayload(65_552)).isEqualTo(4088);
    }

    private static MessageChannel.Fragment fragment(int flag, int length, byte fill) {
        byte[] b = new byte[length];
        java.util.Arrays.fill(b, fill);
        return new MessageChannel.Fragment(0, flag, ByteBuffer.wrap(b));
    }
}
