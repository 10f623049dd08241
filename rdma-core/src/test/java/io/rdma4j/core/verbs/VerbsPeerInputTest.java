package io.rdma4j.core.verbs;

import io.rdma4j.core.ProtocolException;
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
        ConnectData.PeerParameters p = ConnectData.peer(ConnectData.privateData(65536, 32));
        assertThat(p.maxMessageSize()).isEqualTo(65536);
        assertThat(p.receiveDepth()).isEqualTo(32);
        // RoCE pads private data with zeros (IB CM messages have a fixed size): the padding is ignored
        byte[] padded = new byte[56];
        System.arraycopy(ConnectData.privateData(100, 2), 0, padded, 0, ConnectData.PRIVATE_DATA_LENGTH);
        assertThat(ConnectData.peer(padded).receiveDepth()).isEqualTo(2);
    }

    @Test
    void shortOrForeignPrivateDataIsRefused() {
        assertThatThrownBy(() -> ConnectData.peer(new byte[0])).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("0 bytes of connection data");
        assertThatThrownBy(() -> ConnectData.peer(new byte[5])).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("5 bytes");
        assertThatThrownBy(() -> ConnectData.peer(new byte[56])).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("protocol 0x0");
    }

    @Test
    void privateDataWithImpossibleSizesIsRefused() {
        for (int depth : new int[] {-1, 0, 1, 4097, Integer.MAX_VALUE, Integer.MIN_VALUE}) {
            assertThatThrownBy(() -> ConnectData.peer(raw(ConnectData.MAGIC_V1, 65536, depth)))
                    .as("receive depth %d", depth).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("receive depth of " + depth);
        }
        for (int size : new int[] {-1, 0, Integer.MAX_VALUE, Integer.MIN_VALUE}) {
            assertThatThrownBy(() -> ConnectData.peer(raw(ConnectData.MAGIC_V1, size, 32)))
                    .as("max message size %d", size).isInstanceOf(ProtocolException.class)
                    .hasMessageContaining("max-message-size of " + size);
        }
        assertThatCode(() -> ConnectData.peer(raw(ConnectData.MAGIC_V1, 1, 4096))).doesNotThrowAnyException();
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
        for (int flag : new int[] {4, -1, 0x7fffffff, MessageChannel.FLAG_RELEASE | MessageChannel.FLAG_BACKLOG}) {
            assertThatThrownBy(() -> MessageChannel.checkLength(MessageChannel.HEADER + 16, flag, SLOT))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("unknown flag " + flag);
        }
        assertThatThrownBy(() -> MessageChannel.checkLength(MessageChannel.HEADER + 1, MessageChannel.FLAG_CREDIT, SLOT))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("credit-only message with 1 payload");
        assertThatCode(() -> MessageChannel.checkLength(MessageChannel.HEADER, MessageChannel.FLAG_CREDIT, SLOT))
                .doesNotThrowAnyException();
        assertThatCode(() -> MessageChannel.checkLength(MessageChannel.RELEASE_LENGTH, MessageChannel.FLAG_RELEASE, SLOT))
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
    void privateDataWithANonceIsVersion2AndCarriesIt() {
        byte[] nonce = new byte[ConnectData.NONCE_BYTES];
        for (int i = 0; i < nonce.length; i++) {
            nonce[i] = (byte) (i * 17 + 1);
        }
        byte[] data = ConnectData.privateData(4096, 8, nonce);
        assertThat(data).hasSize(ConnectData.PRIVATE_DATA_V2_LENGTH).hasSizeLessThanOrEqualTo(56); // RC REQ room
        assertThat(ByteBuffer.wrap(data).getInt()).isEqualTo(ConnectData.MAGIC_V2);
        ConnectData.PeerParameters p = ConnectData.peer(data);
        assertThat(p.authenticates()).isTrue();
        assertThat(p.nonce()).isEqualTo(nonce);
        assertThat(p.maxMessageSize()).isEqualTo(4096);
        assertThat(p.receiveDepth()).isEqualTo(8);
        byte[] padded = new byte[56];
        System.arraycopy(data, 0, padded, 0, data.length);
        assertThat(ConnectData.peer(padded).nonce()).isEqualTo(nonce);
    }

    @Test
    void privateDataWithoutANonceStaysVersion1() {
        byte[] data = ConnectData.privateData(4096, 8, null);
        assertThat(data).isEqualTo(raw(ConnectData.MAGIC_V1, 4096, 8));
        assertThat(ConnectData.peer(data).authenticates()).isFalse();
        assertThat(ConnectData.peer(data).nonce()).isNull();
        assertThatThrownBy(() -> ConnectData.privateData(4096, 8, new byte[5])).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void shortOrUnknownVersion2PrivateDataIsRefused() {
        byte[] v2 = ConnectData.privateData(4096, 8, new byte[ConnectData.NONCE_BYTES]);
        byte[] cut = java.util.Arrays.copyOf(v2, ConnectData.PRIVATE_DATA_V2_LENGTH - 1);
        assertThatThrownBy(() -> ConnectData.peer(cut)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("version 2 connection data");
        // version 2 fields only, as a peer that knows version 1 alone would read as its 12 bytes
        assertThatThrownBy(() -> ConnectData.peer(raw(ConnectData.MAGIC_V2, 4096, 8))).isInstanceOf(ProtocolException.class);
        byte[] unknownFlag = v2.clone();
        unknownFlag[15] = 3;
        assertThatThrownBy(() -> ConnectData.peer(unknownFlag)).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("unknown connection flags 0x3");
        byte[] noAuth = v2.clone();
        noAuth[15] = 0;
        assertThat(ConnectData.peer(noAuth).authenticates()).isFalse();
        // a version this side does not know names both sides' versions
        assertThatThrownBy(() -> ConnectData.peer(raw(0x52344A03, 4096, 8))).isInstanceOf(ProtocolException.class)
                .hasMessageContaining("0x52344a03").hasMessageContaining("0x52344a01").hasMessageContaining("0x52344a02");
    }

    @Test
    void proofsHaveTheirOwnSlotFlag() {
        assertThat(MessageChannel.FLAG_PROOF).isNotIn(MessageChannel.FLAG_DATA, MessageChannel.FLAG_CREDIT);
        assertThatCode(() -> MessageChannel.checkLength(MessageChannel.HEADER + 32, MessageChannel.FLAG_PROOF, SLOT))
                .doesNotThrowAnyException();
    }

    @Test
    void aSharedSecretNoLongerKeepsVerbsFromOpening() {
        TransportConfig verbsWithSecret = TransportConfig.builder().provider("verbs").sharedSecret("s3cret-of-16-bytes").build();
        Availability a = new VerbsProvider().probe(verbsWithSecret);
        // usable or not depends on this host's devices, never on the secret
        assertThat(a.reason()).doesNotContain("shared-secret");
        TransportConfig autoWithSecret = TransportConfig.builder().sharedSecret("s3cret-of-16-bytes").build();
        assertThat(ProviderRegistry.explain(autoWithSecret).reason()).doesNotContain("shared-secret");
        // a secret too short to resist offline guessing is refused at open, as on tcp
        TransportConfig weak = TransportConfig.builder().provider("verbs").sharedSecret("short").build();
        assertThatThrownBy(() -> new VerbsProvider().open(weak, new io.rdma4j.core.metrics.TransportMetrics("verbs")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least 16 bytes");
    }

    private static byte[] raw(int magic, int maxMessageSize, int receiveDepth) {
        return ByteBuffer.allocate(ConnectData.PRIVATE_DATA_LENGTH).putInt(magic).putInt(maxMessageSize)
                .putInt(receiveDepth).array();
    }
}
