package io.rdma4j.kafka.protocol;

import io.rdma4j.core.ProtocolException;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The aborted-transactions request and reply: what a consumer accepts from an exporter, and what it refuses. */
class AbortedTransactionsTest {

    private static final AbortedTransactions.Request ASKED = new AbortedTransactions.Request("t", 3, 100, 200);

    private static AbortedTransactions.Response ok(long covered, AbortedTransactions.Aborted... aborted) {
        return new AbortedTransactions.Response(AbortedTransactions.Status.OK, covered, List.of(aborted));
    }

    @Test
    void requestAndReplyRoundTrip() {
        assertThat(AbortedTransactions.Request.fromBytes(ByteBuffer.wrap(ASKED.toBytes()))).isEqualTo(ASKED);
        AbortedTransactions.Response reply = ok(200, new AbortedTransactions.Aborted(7, 40, 100),
                new AbortedTransactions.Aborted(9, 150, 900));
        assertThat(AbortedTransactions.Response.fromBytes(ByteBuffer.wrap(reply.toBytes()), ASKED)).isEqualTo(reply);
        AbortedTransactions.Response changing = AbortedTransactions.Response.of(AbortedTransactions.Status.SEGMENTS_CHANGING);
        assertThat(AbortedTransactions.Response.fromBytes(ByteBuffer.wrap(changing.toBytes()), ASKED).status())
                .isEqualTo(AbortedTransactions.Status.SEGMENTS_CHANGING);
    }

    @Test
    void anEmptyNegativeOrTruncatedRequestIsRefused() {
        for (AbortedTransactions.Request bad : List.of(new AbortedTransactions.Request("t", 0, 5, 5),
                new AbortedTransactions.Request("t", 0, 9, 5), new AbortedTransactions.Request("t", 0, -1, 5))) {
            assertThatThrownBy(() -> AbortedTransactions.Request.fromBytes(ByteBuffer.wrap(bad.toBytes())))
                    .as("%s", bad).isInstanceOf(ProtocolException.class).hasMessageContaining("non-empty and non-negative");
        }
        byte[] whole = ASKED.toBytes();
        assertThatThrownBy(() -> AbortedTransactions.Request.fromBytes(ByteBuffer.wrap(whole, 0, whole.length - 1)))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("truncated");
    }

    @Test
    void aLyingReplyIsAProtocolException() {
        List<AbortedTransactions.Response> lies = List.of(
                ok(200, new AbortedTransactions.Aborted(7, 10, 99)),                    // ends before the range
                ok(200, new AbortedTransactions.Aborted(7, 200, 300)),                  // starts after the range
                ok(200, new AbortedTransactions.Aborted(7, 150, 120)),                  // marker before its start
                ok(200, new AbortedTransactions.Aborted(-1, 120, 150)),                 // no producer
                ok(200, new AbortedTransactions.Aborted(7, 160, 170),
                        new AbortedTransactions.Aborted(8, 120, 170)),                  // out of first-offset order
                ok(201, new AbortedTransactions.Aborted(7, 120, 150)),                  // covers past what was asked
                ok(99),                                                                 // covers before what was asked
                new AbortedTransactions.Response(AbortedTransactions.Status.UNKNOWN_PARTITION, -1,
                        List.of(new AbortedTransactions.Aborted(7, 120, 150))));        // an error with transactions
        for (AbortedTransactions.Response lie : lies) {
            assertThatThrownBy(() -> AbortedTransactions.Response.fromBytes(ByteBuffer.wrap(lie.toBytes()), ASKED))
                    .as("%s", lie).isInstanceOf(ProtocolException.class);
        }
    }

    @Test
    void aCountTheBytesCannotHoldSizesNothing() {
        // status OK, covered 200, then a count far beyond the bytes that follow: refused before any list is sized
        ByteBuffer huge = ByteBuffer.allocate(13 + 24).put((byte) 0).putLong(200).putInt(Integer.MAX_VALUE)
                .putLong(7).putLong(120).putLong(150).flip();
        assertThatThrownBy(() -> AbortedTransactions.Response.fromBytes(huge, ASKED))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("claims 2147483647 transactions in 24 bytes");
        ByteBuffer overLimit = ByteBuffer.allocate(13).put((byte) 0).putLong(200)
                .putInt(AbortedTransactions.MAX_PER_RESPONSE + 1).flip();
        assertThatThrownBy(() -> AbortedTransactions.Response.fromBytes(overLimit, ASKED)).isInstanceOf(ProtocolException.class);
        ByteBuffer unknownStatus = ByteBuffer.allocate(13).put((byte) 9).putLong(200).putInt(0).flip();
        assertThatThrownBy(() -> AbortedTransactions.Response.fromBytes(unknownStatus, ASKED))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("unknown aborted-transactions status 9");
        ByteBuffer truncated = ByteBuffer.allocate(5).put((byte) 0).putInt(0).flip();
        assertThatThrownBy(() -> AbortedTransactions.Response.fromBytes(truncated, ASKED))
                .isInstanceOf(ProtocolException.class).hasMessageContaining("truncated");
    }

    @Test
    void aFullReplyFitsTheMessageSize() {
        assertThat(AbortedTransactions.maxPerResponse(64 * 1024)).isEqualTo(AbortedTransactions.MAX_PER_RESPONSE);
        int small = AbortedTransactions.maxPerResponse(1000);
        assertThat(small).isEqualTo((1000 - 13) / 24);
        AbortedTransactions.Aborted[] many = new AbortedTransactions.Aborted[AbortedTransactions.MAX_PER_RESPONSE];
        for (int i = 0; i < many.length; i++) {
            many[i] = new AbortedTransactions.Aborted(i, 100, 150);
        }
        assertThat(ok(200, many).toBytes().length).isLessThanOrEqualTo(64 * 1024);
    }
}
