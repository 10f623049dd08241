package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.TransportConfig;
import io.rdma4j.core.internal.ProviderRegistry;
import io.rdma4j.core.spi.Availability;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What a verbs peer supplies (connect private data, message lengths and flags, credit counts) is checked before
 * it sizes or counts anything; the lab's VerbsHostilePeerGuestTest sends the same at a real responder.
 */
class VerbsPeerInputTest {

    private static final int SLOT = MessageChannel.HEADER + 1024;

    @Test
    void honestPrivateDataIsRead() {
        MessageChannel.PeerParameters p = MessageChannel.peer(MessageChannel.privateData(65536, 32));
        assertThat(p.maxMessageSize()).isEqualTo(65536);
        assertThat(p.receiveDepth()).isEqualTo(32);
        // RoCE pads private data with zeros (IB CM messages have a fixed size): the padding is ignored
        byte[] padded = new byte[56];
        System.arraycopy(MessageChannel.privateData(100, 2), 0, padded, 0, MessageChannel.PRIVATE_DATA_LENGTH);
        assertThat(MessageChannel.peer(padded).receiveDepth()).isEqualTo(2);
    }

    @Test
    void shortOrForeignPrivateDataIsRefused() {
        assertThatThrownBy(() -> MessageChannel.peer(new byte[0])).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("0 bytes of connection data");
        assertThatThrownBy(() -> MessageChannel.peer(new byte[5])).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("5 bytes");
        assertThatThrownBy(() -> MessageChannel.peer(new byte[56])).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("protocol 0x0");
    }

    @Test
    void privateDataWithImpossibleSizesIsRefused() {
        for (int depth : new int[] {-1, 0, 1, 4097, Integer.MAX_VALUE, Integer.MIN_VALUE}) {
            assertThatThrownBy(() -> MessageChannel.peer(raw(MessageChannel.MAGIC_V1, 65536, depth)))
                    .as("receive depth %d", depth).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("receive depth of " + depth);
        }
        for (int size : new int[] {-1, 0, Integer.MAX_VALUE, Integer.MIN_VALUE}) {
            assertThatThrownBy(() -> MessageChannel.peer(raw(MessageChannel.MAGIC_V1, size, 32)))
                    .as("max message size %d", size).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("max-message-size of " + size);
        }
        assertThatCode(() -> MessageChannel.peer(raw(MessageChannel.MAGIC_V1, 1, 4096))).doesNotThrowAnyException();
    }

    @Test
    void emptyShortAndOversizedMessagesAreRefused() {
        for (int length : new int[] {0, 1, 4, MessageChannel.HEADER - 1, -1}) {
            assertThatThrownBy(() -> MessageChannel.checkLength(length, MessageChannel.FLAG_DATA, SLOT))
                    .as("%d bytes", length).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("shorter than the 8-byte");
            // whatever the stale flag in the slot says
            assertThatThrownBy(() -> MessageChannel.checkLength(length, MessageChannel.FLAG_CREDIT, SLOT))
                    .isInstanceOf(ProtocolException.class);
        }
        assertThatThrownBy(() -> MessageChannel.checkLength(SLOT + 1, MessageChannel.FLAG_DATA, SLOT))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("into a slot of " + SLOT);
        assertThatCode(() -> MessageChannel.checkLength(SLOT, MessageChannel.FLAG_DATA, SLOT)).doesNotThrowAnyException();
        assertThatCode(() -> MessageChannel.checkLength(MessageChannel.HEADER, MessageChannel.FLAG_DATA, SLOT))
                .doesNotThrowAnyException();
    }

    @Test
    void unknownFlagsAndCreditMessagesWithPayloadAreRefused() {
        for (int flag : new int[] {2, -1, 0x7fffffff}) {
            assertThatThrownBy(() -> MessageChannel.checkLength(MessageChannel.HEADER + 16, flag, SLOT))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("unknown flag " + flag);
        }
        assertThatThrownBy(() -> MessageChannel.checkLength(MessageChannel.HEADER + 1, MessageChannel.FLAG_CREDIT, SLOT))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("credit-only message with 1 payload");
        assertThatCode(() -> MessageChannel.checkLength(MessageChannel.HEADER, MessageChannel.FLAG_CREDIT, SLOT))
                .doesNotThrowAnyException();
    }

    @Test
    void creditsReturnedBeyondWhatWasUsedAreRefused() {
        assertThat(MessageChannel.creditsAfter(0, 32, 32)).isEqualTo(32);
        assertThat(MessageChannel.creditsAfter(10, 0, 32)).isEqualTo(10);
        assertThatThrownBy(() -> MessageChannel.creditsAfter(10, -1, 32)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("returned -1 credits");
        assertThatThrownBy(() -> MessageChannel.creditsAfter(10, 23, 32)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("at most 32");
        // no int overflow lets a huge count through
        assertThatThrownBy(() -> MessageChannel.creditsAfter(10, Integer.MAX_VALUE, 32)).isInstanceOf(ProtocolException.class);
        assertThatThrownBy(() -> MessageChannel.creditsAfter(10, Integer.MIN_VALUE, 32)).isInstanceOf(ProtocolException.class);
    }

    @Test
    void aPeerSendingWithoutCreditsIsRefused() {
        int peerCredits = 2;
        peerCredits = MessageChannel.peerCreditsAfterData(peerCredits, 2);
        peerCredits = MessageChannel.peerCreditsAfterData(peerCredits, 2);
        assertThat(peerCredits).isZero();
        int none = peerCredits;
        assertThatThrownBy(() -> MessageChannel.peerCreditsAfterData(none, 2)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("without a credit");
    }

    @Test
    void aSharedSecretIsRefusedAtOpenNotIgnored() {
        TransportConfig verbsWithSecret = TransportConfig.builder().provider("verbs").sharedSecret("s3cret-of-16-bytes").build();
        Availability a = new VerbsProvider().probe(verbsWithSecret);
        assertThat(a.usable()).isFalse();
        assertThat(a.reason()).contains("cannot enforce 'shared-secret'");
        assertThatThrownBy(() -> RdmaTransport.open(verbsWithSecret)).isInstanceOf(ProviderUnavailableException.class)
                .hasMessageContaining("cannot enforce 'shared-secret'").hasMessageContaining("provider=tcp");
        // auto takes tcp, which enforces it, and says why verbs was passed over
        TransportConfig autoWithSecret = TransportConfig.builder().sharedSecret("s3cret-of-16-bytes").build();
        var selection = ProviderRegistry.explain(autoWithSecret);
        assertThat(selection.provider()).isEqualTo("tcp");
        assertThat(selection.reason()).contains("cannot enforce 'shared-secret'");
    }

    private static byte[] raw(int magic, int maxMessageSize, int receiveDepth) {
        return ByteBuffer.allocate(MessageChannel.PRIVATE_DATA_LENGTH).putInt(magic).putInt(maxMessageSize)
                .putInt(receiveDepth).array();
    }
}
