package io.rdma4j.kafka.exporter;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Properties;

/**
 * The sidecar's command line: {@code key=value} pairs and properties files, later ones winning. A key the exporter
 * does not know is refused rather than ignored, so a misspelt setting fails at start and not as a silent default.
 */
final class ExporterArguments {

    static final String USAGE = "arguments are key=value pairs (rdma.exporter.log.dirs=..., rdma.exporter.bootstrap.servers=..., "
            + "rdma.exporter.listen.address=...) or a properties file; see the Exporter keys in rdma-kafka-transport/README.md";

    private ExporterArguments() {
    }

    /** @throws IllegalArgumentException saying what is wrong with which argument, and what to pass instead */
    static Properties parse(String... args) {
        Properties props = new Properties();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (arg.startsWith("-")) {
                throw new IllegalArgumentException("unknown option " + arg + ": " + USAGE);
            } else if (eq > 0) {
                props.setProperty(arg.substring(0, eq).trim(), arg.substring(eq + 1));
            } else {
                load(props, arg);
            }
        }
        for (String key : props.stringPropertyNames()) {
            checkKnown(key);
        }
        return props;
    }

    private static void load(Properties props, String file) {
        try (InputStream in = Files.newInputStream(Path.of(file))) {
            props.load(in);
        } catch (NoSuchFileException e) {
            throw new IllegalArgumentException("no file " + file + ": " + USAGE);
        } catch (IOException | RuntimeException e) {
            throw new IllegalArgumentException("cannot read " + file + " (" + e.getMessage() + "): " + USAGE);
        }
    }

    /** Exporter keys, Admin client settings under {@code rdma.exporter.admin.}, and transport keys under {@code rdma.}. */
    private static void checkKnown(String key) {
        if (key.startsWith(ExporterConfig.ADMIN_PREFIX) || ExporterConfig.KEYS.contains(key)) {
            return;
        }
        if (key.startsWith(ExporterConfig.PREFIX)) {
            throw new IllegalArgumentException("unknown key " + key + ": the exporter's keys are " + new java.util.TreeSet<>(ExporterConfig.KEYS)
                    + " and " + ExporterConfig.ADMIN_PREFIX + "<Admin client setting>");
        }
        if (!key.startsWith("rdma.")) {
            throw new IllegalArgumentException("unknown key " + key + ": exporter keys start with " + ExporterConfig.PREFIX
                    + ", transport keys with rdma. (" + USAGE + ")");
        }
        String transportKey = key.substring("rdma.".length());
        if (!TRANSPORT_KEYS.contains(transportKey) && !transportKey.startsWith("tcp.") && !transportKey.startsWith("verbs.")) {
            throw new IllegalArgumentException("unknown key " + key + ": the transport's keys are rdma." + TRANSPORT_KEYS
                    + ", rdma.tcp.* and rdma.verbs.* (see rdma-core's TransportConfig)");
        }
    }

    /** {@code TransportConfig}'s own keys, which it takes from any integration's properties and so does not check. */
    private static final java.util.Set<String> TRANSPORT_KEYS = new java.util.TreeSet<>(java.util.Set.of("provider", "device", "port",
            "gid-index", "interface", "address", "connect-timeout", "operation-timeout", "max-outstanding-operations",
            "max-message-size", "shared-secret", "allow-unauthenticated"));
}
