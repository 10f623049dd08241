package io.rdma4j.core.internal.auth;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;

/**
 * Proof of knowledge of the shared secret, as both providers' handshakes exchange it: HMAC-SHA256 keyed with the
 * secret over a protocol label, the prover's role, the prover's nonce, the verifier's nonce and a channel binding.
 * The role keeps a proof from being reflected back to its sender; the verifier's fresh nonce keeps an old proof
 * from being replayed; the label keeps a proof made for one protocol from verifying in another.
 *
 * <p>A package of its own, depending on nothing of rdma4j: {@code io.rdma4j.core.internal} finds the providers, so
 * the providers cannot use it without a package cycle.
 */
public final class SecretProof {

    /** Shorter secrets could be guessed offline from one observed handshake. */
    public static final int MIN_SECRET_BYTES = 16;
    /** The length of a proof (an HMAC-SHA256). */
    public static final int PROOF_BYTES = 32;
    /** The role of the side that connects; it proves first. */
    public static final byte CONNECTOR = 'C';
    /** The role of the side that listens; it proves only to a peer whose proof it accepted. */
    public static final byte LISTENER = 'L';
    private static final SecureRandom RANDOM = new SecureRandom();

    private SecretProof() {
    }

    /** Refuses a configured secret (empty included) shorter than {@value #MIN_SECRET_BYTES} bytes. */
    public static void checkSecret(String secret) {
        if (secret != null && secret.getBytes(StandardCharsets.UTF_8).length < MIN_SECRET_BYTES) {
            throw new IllegalArgumentException("shared-secret must be at least " + MIN_SECRET_BYTES
                    + " bytes (128 bits), got " + secret.getBytes(StandardCharsets.UTF_8).length
                    + "; generate one, e.g. with 'openssl rand -base64 24', or leave shared-secret unset for no authentication");
        }
    }

    /** A fresh random nonce of {@code bytes} bytes. */
    public static byte[] nonce(int bytes) {
        byte[] n = new byte[bytes];
        RANDOM.nextBytes(n);
        return n;
    }

    /** HMAC-SHA256(secret, label || role || prover's nonce || verifier's nonce || binding). */
    public static byte[] proof(String label, String secret, byte role, byte[] proverNonce, byte[] verifierNonce,
                               byte[] binding) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            mac.update(label.getBytes(StandardCharsets.US_ASCII));
            mac.update(role);
            mac.update(proverNonce);
            mac.update(verifierNonce);
            mac.update(binding);
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is not available in this JDK", e);
        }
    }

    /**
     * Whether {@code received} is the proof a peer in {@code peerRole} makes with its nonce {@code peerNonce} against
     * this side's {@code ownNonce}; compared in constant time. Any other length fails.
     */
    public static boolean verify(byte[] received, String label, String secret, byte peerRole, byte[] peerNonce,
                                 byte[] ownNonce, byte[] binding) {
        return received != null && MessageDigest.isEqual(received, proof(label, secret, peerRole, peerNonce, ownNonce, binding));
    }
}
