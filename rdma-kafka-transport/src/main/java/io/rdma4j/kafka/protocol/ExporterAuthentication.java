package io.rdma4j.kafka.protocol;

import io.rdma4j.core.ProtocolException;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;

/**
 * How a consumer proves to a log exporter that it holds a Kafka delegation token, as the bodies of
 * {@link io.rdma4j.core.RequestTypes#KAFKA_AUTHENTICATE} requests: it asks for a {@linkplain Challenge challenge}
 * (a fresh nonce of the exporter's, bound to the connection), then sends the token id with
 * {@link #proof HMAC-SHA256(token HMAC, nonce and token id)}. The token's HMAC, which is the credential, never crosses
 * the wire; the exporter learns it from the cluster ({@code describeDelegationToken}) and checks the proof. A proof
 * is worth nothing on another connection, since each connection gets its own nonce. The exporter answers a proof it
 * takes with its {@link Verdict}: a consumer that proves a token reads only from exporters that answer
 * {@link Verdict#ACLS_CHECKED}, since an exporter that checks nothing would serve it topics its principal may not read.
 */
public final class ExporterAuthentication {

    /** Bytes of the exporter's nonce. */
    public static final int NONCE_BYTES = 32;
    /** Longest token id accepted (Kafka's are 22 characters). */
    public static final int MAX_TOKEN_ID_BYTES = 256;
    private static final byte CHALLENGE = 1;
    private static final byte PROOF = 2;
    private static final byte[] CONTEXT = "rdma4j-kafka-exporter-token-proof-v1".getBytes(StandardCharsets.US_ASCII);

    private ExporterAuthentication() {
    }

    /** A request: {@link Challenge} or {@link Proof}. */
    public sealed interface Request permits Challenge, Proof {
        byte[] toBytes();

        /** @throws ProtocolException for anything but a well-formed challenge or proof request */
        static Request fromBytes(ByteBuffer in) {
            try {
                byte kind = in.get();
                if (kind == CHALLENGE && !in.hasRemaining()) {
                    return new Challenge();
                }
                if (kind != PROOF) {
                    throw new ProtocolException("unknown or malformed rdma4j exporter authentication request (kind " + kind + ")");
                }
                int idLength = in.getShort() & 0xffff;
                if (idLength == 0 || idLength > MAX_TOKEN_ID_BYTES) {
                    throw new ProtocolException("token id of " + idLength + " bytes (1 to " + MAX_TOKEN_ID_BYTES + ")");
                }
                byte[] id = new byte[idLength];
                in.get(id);
                byte[] proof = new byte[32];
                in.get(proof);
                if (in.hasRemaining()) {
                    throw new ProtocolException("trailing bytes after an rdma4j exporter authentication proof");
                }
                return new Proof(new String(id, StandardCharsets.UTF_8), proof);
            } catch (BufferUnderflowException e) {
                throw new ProtocolException("truncated rdma4j exporter authentication request");
            }
        }
    }

    /** Asks for a nonce; the reply is its {@link #NONCE_BYTES} bytes. */
    public record Challenge() implements Request {
        @Override
        public byte[] toBytes() {
            return new byte[]{CHALLENGE};
        }
    }

    /** The token id and the proof over the last nonce this connection was given; the reply is a {@link Verdict}. */
    public record Proof(String tokenId, byte[] proof) implements Request {
        @Override
        public byte[] toBytes() {
            byte[] id = tokenId.getBytes(StandardCharsets.UTF_8);
            return ByteBuffer.allocate(1 + 2 + id.length + proof.length).put(PROOF).putShort((short) id.length).put(id)
                    .put(proof).array();
        }
    }

    /**
     * The reply to a proof: whether the exporter checks the Kafka ACLs of the token's owner on this connection. An
     * exporter that checks refuses a proof it cannot verify instead; one that does not check answers
     * {@link #ACLS_NOT_CHECKED} without looking at the proof.
     */
    public enum Verdict {
        ACLS_NOT_CHECKED, ACLS_CHECKED;

        public byte[] toBytes() {
            return new byte[]{(byte) ordinal()};
        }

        /** @throws ProtocolException for anything but one known verdict byte */
        public static Verdict fromBytes(ByteBuffer reply) {
            if (reply.remaining() != 1) {
                throw new ProtocolException("an exporter proof verdict of " + reply.remaining() + " bytes, expected 1");
            }
            int v = reply.get();
            if (v < 0 || v >= values().length) {
                throw new ProtocolException("unknown exporter proof verdict " + v);
            }
            return values()[v];
        }
    }

    /** HMAC-SHA256 keyed by the token's HMAC over a fixed context, the nonce and the token id. */
    public static byte[] proof(byte[] tokenHmac, byte[] nonce, String tokenId) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(tokenHmac, "HmacSHA256"));
            mac.update(CONTEXT);
            mac.update(nonce);
            return mac.doFinal(tokenId.getBytes(StandardCharsets.UTF_8));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is missing from this JDK", e);
        }
    }

    /** The nonce of a challenge reply. */
    public static byte[] nonce(ByteBuffer reply) {
        if (reply.remaining() != NONCE_BYTES) {
            throw new ProtocolException("an exporter challenge of " + reply.remaining() + " bytes, expected " + NONCE_BYTES);
        }
        byte[] nonce = new byte[NONCE_BYTES];
        reply.get(nonce);
        return nonce;
    }
}
