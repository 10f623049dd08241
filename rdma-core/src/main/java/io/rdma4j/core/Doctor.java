package io.rdma4j.core;

import io.rdma4j.core.internal.ProviderRegistry;
import io.rdma4j.core.spi.RdmaProvider;
import io.rdma4j.nativeloader.discovery.DiscoveryReport;

import java.util.HashMap;
import java.util.Map;

/**
 * Prints what this host offers for RDMA (devices, ports, states, link layers, GIDs, memlock, advice) and
 * which provider {@code auto} (or the configured one) would choose, and why.
 *
 * <pre>
 * ./mvnw -q -pl rdma-core exec:java -Dexec.mainClass=io.rdma4j.core.Doctor [-Dexec.args="device=rxe0 address=10.9.9.1"]
 * java --enable-native-access=ALL-UNNAMED -cp rdma-core.jar:rdma-native-loader.jar io.rdma4j.core.Doctor [key=value ...]
 * </pre>
 * Arguments are transport options without prefix ({@code provider}, {@code device}, {@code port},
 * {@code gid-index}, {@code interface}, {@code address}).
 */
public final class Doctor {

    private Doctor() {
    }

    public static void main(String[] args) {
        Map<String, String> properties = new HashMap<>();
        for (String arg : args) {
            if (arg.startsWith("--")) {
                continue; // a launcher's own flag (the samples runner passes --exit), not a transport option
            }
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                System.err.println("arguments are key=value transport options, e.g. device=mlx5_0; got '" + arg + "'");
                System.exit(2);
            }
            properties.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        System.out.print(report(TransportConfig.fromProperties(properties, "")));
    }

    /** The whole report as text. */
    public static String report(TransportConfig config) {
        StringBuilder out = new StringBuilder();
        DiscoveryReport discovery;
        try {
            discovery = DiscoveryReport.forThisHost(io.rdma4j.core.verbs.VerbsDiscovery.options(config));
            out.append(discovery.toText());
        } catch (IllegalArgumentException e) {
            out.append("configuration problem: ").append(e.getMessage()).append(System.lineSeparator());
        }
        out.append("providers:").append(System.lineSeparator());
        for (RdmaProvider p : ProviderRegistry.providers()) {
            var a = p.probe(config);
            out.append("  ").append(p.name()).append(" (auto preference ").append(p.autoPreference()).append("): ")
                    .append(a.usable() ? "usable: " : "unusable: ").append(a.reason()).append(System.lineSeparator());
        }
        try {
            ProviderSelection s = ProviderRegistry.explain(config);
            out.append("provider=").append(config.provider()).append(" chooses ").append(s.provider()).append(": ")
                    .append(s.reason()).append(System.lineSeparator());
        } catch (RuntimeException e) {
            out.append("provider=").append(config.provider()).append(" chooses nothing: ").append(e.getMessage())
                    .append(System.lineSeparator());
        }
        return out.toString();
    }
}
