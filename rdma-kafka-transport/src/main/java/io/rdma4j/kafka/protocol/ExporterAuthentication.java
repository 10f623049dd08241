package io.rdma4j.kafka.protocol;

import io.rdma4j.core.ProtocolException;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.List;

/**
 * How a consumer proves to a log exporter that it holds a Kafka delegation token, as the bodies of
 * {@link io.rdma4j.core.RequestTypes#KAFKA_AUTHENTICATE} requests: it asks for a {@linkplain Challenge challenge}
 * (a fresh nonce of the exporter's, bound to the connection), then sends the token id with
 * {@link #proof HMAC-SHA256(token HMAC, nonce and token id)}, with the topics it is about to read, on which the exporter
 * decides before it answers (so the consumer's first directory request finds the decision made, one round trip fewer
 * than asking for it after the proof). The token's HMAC, which is the credential, never crosses
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
    /** Most topics a proof names to be decided on; a consumer reading more has the rest decided as it reads them. */
    public static final int MAX_TOPICS_PER_PROOF = 64;
    /** Longest topic name accepted, in bytes (Kafka's are at most 249 ASCII characters). */
    public static final int MAX_TOPIC_BYTES = 249;
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
                List<String> topics = in.hasRemaining() ? topics(in) : List.of();
                if (in.hasRemaining()) {
                    throw new ProtocolException("trailing bytes after an rdma4j exporter authentication proof");
                }
                return new Proof(new String(id, StandardCharsets.UTF_8), proof, topics);
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

    /**
     * The token id and the proof over the last nonce this connection was given, and the topics to be decided on (at most
     * {@link #MAX_TOPICS_PER_PROOF}; not covered by the proof, since deciding grants nothing the token's owner may not
     * read); the reply is a {@link Verdict}.
     */
    public record Proof(String tokenId, byte[] proof, List<String> topics) implements Request {

        public Proof {
            topics = List.copyOf(topics);
            if (topics.size() > MAX_TOPICS_PER_PROOF) {
                throw new IllegalArgumentException(topics.size() + " topics in one proof, at most " + MAX_TOPICS_PER_PROOF);
            }
        }

        public Proof(String tokenId, byte[] proof) {
            this(tokenId, proof, List.of());
        }

        @Override
        public byte[] toBytes() {
            byte[] id = tokenId.getBytes(StandardCharsets.UTF_8);
            List<byte[]> names = topics.stream().map(t -> t.getBytes(StandardCharsets.UTF_8)).toList();
            int size = 1 + 2 + id.length + proof.length + (names.isEmpty() ? 0 : 2 + names.stream().mapToInt(n -> 2 + n.length).sum());
            ByteBuffer out = ByteBuffer.allocate(size).put(PROOF).putShort((short) id.length).put(id).put(proof);
            if (!names.isEmpty()) {
                out.putShort((short) names.size());
                names.forEach(n -> out.putShort((short) n.length).put(n));
            }
            return out.array();
        }
    }

    private static List<String> topics(ByteBuffer in) {
        int count = in.getShort() & 0xffff;
        if (count == 0 || count > MAX_TOPICS_PER_PROOF) {
            throw new ProtocolException(count + " topics in a proof (1 to " + MAX_TOPICS_PER_PROOF + ")");
        }
        List<String> topics = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int length = in.getShort() & 0xffff;
            if (length == 0 || length > MAX_TOPIC_BYTES) {
                throw new ProtocolException("topic name of " + length + " bytes in a proof (1 to " + MAX_TOPIC_BYTES + ")");
            }
            byte[] name = new byte[length];
            in.get(name);
            topics.add(new String(name, StandardCharsets.UTF_8));
        }
        return topics;
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
