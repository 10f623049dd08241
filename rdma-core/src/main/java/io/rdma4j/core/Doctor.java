package io.rdma4j.core;

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
        return TransportFactoryLoader.factory().doctorReport(config);
    }
}
