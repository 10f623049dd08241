package io.rdma4j.core.tcp;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;

/**
 * A P-256 key pair and a self-signed X.509 (v1) certificate for it, made in memory when a transport opens with
 * {@code tcp.tls.authentication=shared-secret}. The certificate only lets TLS run: it identifies no one and
 * nobody checks it; the peers authenticate each other with the shared secret bound to the TLS session. The JDK
 * has no public API that writes a certificate, hence the few DER encodings here.
 *
 * @param keys        the key pair
 * @param certificate the self-signed certificate of {@code keys.getPublic()}
 */
record EphemeralCertificate(KeyPair keys, X509Certificate certificate) {

    private static final byte[] ECDSA_WITH_SHA256 = {0x06, 0x08, 0x2A, (byte) 0x86, 0x48, (byte) 0xCE, 0x3D, 0x04, 0x03, 0x02};
    private static final byte[] COMMON_NAME = {0x06, 0x03, 0x55, 0x04, 0x03};
    /** RFC 5280 wants UTCTime for dates before 2050. */
    private static final DateTimeFormatter UTC_TIME = DateTimeFormatter.ofPattern("yyMMddHHmmss'Z'");

    static EphemeralCertificate create() {
        try {
            KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
            generator.initialize(new ECGenParameterSpec("secp256r1"));
            KeyPair keys = generator.generateKeyPair();
            byte[] algorithm = der(0x30, ECDSA_WITH_SHA256);
            byte[] name = der(0x30, der(0x31, der(0x30, COMMON_NAME, der(0x0C, "rdma4j".getBytes(StandardCharsets.US_ASCII)))));
            ZonedDateTime now = ZonedDateTime.now(ZoneOffset.UTC);
            byte[] validity = der(0x30, time(now.minusDays(1)), time(now.plusYears(10)));
            byte[] serial = der(0x02, new BigInteger(64, new SecureRandom()).add(BigInteger.ONE).toByteArray());
            byte[] toBeSigned = der(0x30, serial, algorithm, name, validity, name, keys.getPublic().getEncoded());
            Signature signer = Signature.getInstance("SHA256withECDSA");
            signer.initSign(keys.getPrivate());
            signer.update(toBeSigned);
            byte[] signature = signer.sign();
            byte[] bits = new byte[signature.length + 1]; // leading byte: no unused bits
            System.arraycopy(signature, 0, bits, 1, signature.length);
            byte[] encoded = der(0x30, toBeSigned, algorithm, der(0x03, bits));
            X509Certificate certificate = (X509Certificate) CertificateFactory.getInstance("X.509")
                    .generateCertificate(new ByteArrayInputStream(encoded));
            certificate.verify(keys.getPublic());
            return new EphemeralCertificate(keys, certificate);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("cannot make the ephemeral TLS certificate: " + e.getMessage(), e);
        }
    }

    private static byte[] time(ZonedDateTime t) {
        return der(0x17, UTC_TIME.format(t).getBytes(StandardCharsets.US_ASCII));
    }

    /** One DER element: the tag, the definite length, then the contents. */
    private static byte[] der(int tag, byte[]... contents) {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        for (byte[] c : contents) {
            body.writeBytes(c);
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(tag);
        int length = body.size();
        if (length < 0x80) {
            out.write(length);
        } else if (length < 0x100) {
            out.write(0x81);
            out.write(length);
        } else {
            out.write(0x82);
            out.write(length >> 8);
            out.write(length);
        }
        out.writeBytes(body.toByteArray());
        return out.toByteArray();
    }
}
