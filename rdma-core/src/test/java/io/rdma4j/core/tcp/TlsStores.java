package io.rdma4j.core.tcp;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Key and trust stores for TLS tests, made once per JVM with the JDK's keytool: two EC key pairs ("member" and
 * "stranger") and a trust store holding only the member's certificate. Public for the TLS benchmark in it/bench-transport.
 */
public final class TlsStores {

    public static final String PASSWORD = "changeit";

    public final Path member;
    public final Path stranger;
    public final Path trust;

    private static TlsStores made;

    private TlsStores(Path dir) throws IOException, InterruptedException {
        member = dir.resolve("member.p12");
        stranger = dir.resolve("stranger.p12");
        trust = dir.resolve("trust.p12");
        keytool("-genkeypair", "-alias", "member", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=member",
                "-validity", "2", "-storetype", "PKCS12", "-keystore", member.toString(), "-storepass", PASSWORD);
        keytool("-genkeypair", "-alias", "stranger", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=stranger",
                "-validity", "2", "-storetype", "PKCS12", "-keystore", stranger.toString(), "-storepass", PASSWORD);
        Path cer = dir.resolve("member.cer");
        keytool("-exportcert", "-alias", "member", "-keystore", member.toString(), "-storepass", PASSWORD, "-file", cer.toString());
        keytool("-importcert", "-noprompt", "-alias", "member", "-file", cer.toString(), "-storetype", "PKCS12",
                "-keystore", trust.toString(), "-storepass", PASSWORD);
    }

    public static synchronized TlsStores get() {
        if (made == null) {
            try {
                Path dir = Files.createTempDirectory("rdma4j-tls");
                dir.toFile().deleteOnExit();
                made = new TlsStores(dir);
                for (Path p : List.of(made.member, made.stranger, made.trust, dir.resolve("member.cer"))) {
                    p.toFile().deleteOnExit();
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
        return made;
    }

    private static void keytool(String... args) throws IOException, InterruptedException {
        Path java = Path.of(ProcessHandle.current().info().command().orElseThrow());
        List<String> command = new ArrayList<>(List.of(java.resolveSibling("keytool").toString()));
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (p.waitFor() != 0) {
            throw new IllegalStateException("keytool " + String.join(" ", args) + " failed: " + out);
        }
    }
}
