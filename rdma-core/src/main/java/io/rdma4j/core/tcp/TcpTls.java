package io.rdma4j.core.tcp;

import io.rdma4j.core.TransportConfig;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.TrustManagerFactory;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.util.Locale;
import java.util.Optional;

/**
 * TLS for the tcp provider ({@code tcp.tls*} keys): TLS 1.3 through the JDK's {@link SSLEngine}, the
 * listener authenticated by its certificate and, with {@code tcp.tls.client-auth=required} (the default), the
 * connecting side by its own. Peers are trusted through the trust store (no host name check: the trust store
 * names the peers).
 *
 * @param context       made from the key and trust stores
 * @param hasKey        whether a key store was given (a listener needs one)
 * @param requireClient whether the listener requires and checks the connecting side's certificate
 */
record TcpTls(SSLContext context, boolean hasKey, boolean requireClient) {

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
            return Optional.of(new TcpTls(context, keys != null, clientAuth.equals("required")));
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException("cannot set up TLS from tcp.tls.*: " + e.getMessage(), e);
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
