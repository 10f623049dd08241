package io.rdma4j.core.tcp;

import io.rdma4j.core.TransportConfig;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509ExtendedTrustManager;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.Locale;
import java.util.Optional;

/**
 * TLS for the tcp provider ({@code tcp.tls*} keys): TLS 1.3 through the JDK's {@link SSLEngine}. Two ways to
 * authenticate the peers ({@code tcp.tls.authentication}):
 * <ul>
 * <li>{@code certificates} (the default): the listener by its certificate and, with
 * {@code tcp.tls.client-auth=required} (the default), the connecting side by its own. Peers are trusted through
 * the trust store (no host name check: the trust store names the peers), and the certificate's subject is the
 * peer's principal.</li>
 * <li>{@code shared-secret}: each transport makes an ephemeral self-signed certificate that nobody checks; the
 * {@code shared-secret}, required in this mode, authenticates both sides, bound to the TLS session so a relay
 * that terminates TLS on both sides fails. Encryption without certificates to distribute; peers have no
 * principal (the secret proves membership, not who).</li>
 * </ul>
 *
 * @param context         made from the key and trust stores, or the ephemeral certificate
 * @param hasKey          whether this side has a key (a listener needs one)
 * @param requireClient   whether the listener requires and checks the connecting side's certificate
 * @param identifiesPeers whether a verified peer certificate names the peer (certificate mode)
 */
record TcpTls(SSLContext context, boolean hasKey, boolean requireClient, boolean identifiesPeers) {

    static final String PROTOCOL = "TLSv1.3";

    /** The TLS settings of {@code config}; empty when {@code tcp.tls} is not {@code true}. */
    static Optional<TcpTls> from(TransportConfig config) {
        String enabled = config.option("tcp", "tls").orElse("false").trim().toLowerCase(Locale.ROOT);
        if (!enabled.equals("true")) {
            if (!enabled.equals("false")) {
                throw new IllegalArgumentException("tcp.tls must be true or false, got '" + enabled + "'");
            }
            for (String key : config.providerOptions().keySet()) {
                if (key.startsWith("tcp.tls.")) {
                    throw new IllegalArgumentException(key + " is set but tcp.tls is not true; set tcp.tls=true to use TLS");
                }
            }
            return Optional.empty();
        }
        String authentication = config.option("tcp", "tls.authentication").orElse("certificates").trim()
                .toLowerCase(Locale.ROOT);
        switch (authentication) {
            case "certificates" -> { }
            case "shared-secret" -> {
                return Optional.of(secretAuthenticated(config));
            }
            default -> throw new IllegalArgumentException("tcp.tls.authentication must be certificates or shared-secret, got '"
                    + authentication + "'");
        }
        String clientAuth = config.option("tcp", "tls.client-auth").orElse("required").trim().toLowerCase(Locale.ROOT);
        if (!clientAuth.equals("required") && !clientAuth.equals("none")) {
            throw new IllegalArgumentException("tcp.tls.client-auth must be required or none, got '" + clientAuth + "'");
        }
        try {
            KeyManagerFactory keys = null;
            Optional<String> keyStore = config.option("tcp", "tls.key-store");
            if (keyStore.isPresent()) {
                char[] password = config.option("tcp", "tls.key-store-password").orElse("").toCharArray();
                keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
                keys.init(load("tcp.tls.key-store", keyStore.get(), password), password);
            }
            TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            Optional<String> trustStore = config.option("tcp", "tls.trust-store");
            trust.init(trustStore.isPresent() ? load("tcp.tls.trust-store", trustStore.get(),
                    config.option("tcp", "tls.trust-store-password").orElse("").toCharArray()) : null);
            SSLContext context = SSLContext.getInstance(PROTOCOL);
            context.init(keys == null ? null : keys.getKeyManagers(), trust.getTrustManagers(), null);
            return Optional.of(new TcpTls(context, keys != null, clientAuth.equals("required"), true));
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException("cannot set up TLS from tcp.tls.*: " + e.getMessage(), e);
        }
    }

    private static TcpTls secretAuthenticated(TransportConfig config) {
        if (config.sharedSecretValue().isEmpty()) {
            throw new IllegalArgumentException("tcp.tls.authentication=shared-secret needs shared-secret, which then"
                    + " authenticates the peers instead of certificates; set one (the same on every peer)");
        }
        for (String key : config.providerOptions().keySet()) {
            if (key.startsWith("tcp.tls.") && !key.equals("tcp.tls.authentication")) {
                throw new IllegalArgumentException(key + " does not apply with tcp.tls.authentication=shared-secret"
                        + " (an ephemeral certificate is made, and the shared secret authenticates the peers); remove it,"
                        + " or use tcp.tls.authentication=certificates");
            }
        }
        EphemeralCertificate own = EphemeralCertificate.create();
        try {
            KeyStore store = KeyStore.getInstance("PKCS12");
            store.load(null, null);
            char[] password = new char[0];
            store.setKeyEntry("rdma4j", own.keys().getPrivate(), password, new Certificate[] {own.certificate()});
            KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            keys.init(store, password);
            SSLContext context = SSLContext.getInstance(PROTOCOL);
            context.init(keys.getKeyManagers(), new TrustManager[] {new UncheckedCertificates()}, null);
            return new TcpTls(context, true, false, false);
        } catch (GeneralSecurityException | IOException e) {
            throw new IllegalStateException("cannot set up TLS with an ephemeral certificate: " + e.getMessage(), e);
        }
    }

    /**
     * Accepts any certificate: only in shared-secret mode, where the certificate authenticates nothing and the
     * secret proofs, bound to the session, do.
     */
    static final class UncheckedCertificates extends X509ExtendedTrustManager {
        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket) {
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket) {
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine) {
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine) {
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType) {
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType) {
        }

        @Override
        public X509Certificate[] getAcceptedIssuers() {
            return new X509Certificate[0];
        }
    }

    private static KeyStore load(String key, String path, char[] password) throws GeneralSecurityException {
        try (InputStream in = Files.newInputStream(Path.of(path))) {
            KeyStore store = KeyStore.getInstance(path.endsWith(".jks") ? "JKS" : "PKCS12");
            store.load(in, password);
            return store;
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read " + key + " '" + path + "': " + e.getMessage()
                    + "; check the path and its password", e);
        }
    }

    SSLEngine engine(boolean connecting, InetSocketAddress peer) {
        SSLEngine engine = context.createSSLEngine(peer.getHostString(), peer.getPort());
        engine.setEnabledProtocols(new String[] {PROTOCOL});
        engine.setUseClientMode(connecting);
        if (!connecting) {
            engine.setNeedClientAuth(requireClient);
        }
        return engine;
    }
}
