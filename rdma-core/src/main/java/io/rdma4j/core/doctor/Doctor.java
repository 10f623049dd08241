package io.rdma4j.core.doctor;

import io.rdma4j.core.ProviderUnavailableException;
import io.rdma4j.core.RdmaTransport;
import io.rdma4j.core.RdmaTransportFactory;
import io.rdma4j.core.TransportConfig;

import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * The doctor: what this host offers for RDMA and which provider {@code auto} (or the configured one) chooses, and
 * a fabric check between two hosts.
 *
 * <pre>
 * java -jar rdma4j-doctor.jar [key=value ...]                      # this host: devices, ports, GIDs, memlock, advice
 * java -jar rdma4j-doctor.jar --serve [ADDRESS[:PORT]] [key=value ...]   # on one host: publish a test region
 * java -jar rdma4j-doctor.jar --ping HOST[:PORT] [key=value ...]          # on another: provider of each side,
 *                                                                          # READ latency and bandwidth
 * </pre>
 * The key=value arguments are transport options without prefix ({@code provider}, {@code device}, {@code port},
 * {@code gid-index}, {@code interface}, {@code address}, {@code shared-secret}, timeouts, {@code tcp.*},
 * {@code verbs.*}). The exit codes are {@link ExitCode}'s.
 */
public final class Doctor {

    /** How many verbs connections the report's memlock section sizes for when {@code --connections} is not given. */
    public static final int DEFAULT_CONNECTIONS = 1024;

    /** The port {@code --serve} listens on and {@code --ping} connects to when none is given. */
    public static final int DEFAULT_PORT = 7470;

    private static final Set<String> TRANSPORT_KEYS = Set.of("provider", "device", "port", "gid-index", "interface",
            "address", "connect-timeout", "operation-timeout", "max-outstanding-operations", "max-message-size",
            "shared-secret", "allow-unauthenticated");

    static final String USAGE = """
            usage: java -jar rdma4j-doctor.jar [--connections=N] [key=value ...]
                   java -jar rdma4j-doctor.jar --serve [ADDRESS[:PORT]] [key=value ...]
                   java -jar rdma4j-doctor.jar --ping HOST[:PORT] [--latency-reads=N] [--bandwidth-seconds=S] [key=value ...]
              without --serve/--ping: this host's RDMA devices, the provider choice and advice, and whether the
                        memlock limit holds N verbs connections (default %d)
              --serve   publish a test region and answer pings (default 127.0.0.1:%d; for other hosts give this
                        host's address, e.g. the RDMA interface's, and shared-secret=... or tcp.tls=true, or
                        allow-unauthenticated=true); runs until stopped
              --ping    connect to a --serve doctor, print the provider of each side, verify READ latency
                        (8 B reads, default 1000) and bandwidth (1 MiB reads, default 2 s)
              key=value transport options: provider=auto|verbs|tcp, device=mlx5_0, address=10.0.0.5,
                        shared-secret=..., tcp.tls=true, ... (as in the README's configuration table)
            exit codes: 0 ok, 1 unexpected failure, 2 bad arguments, 3 cannot connect, 4 authentication failed,
                        5 reads failed or returned wrong bytes, 6 this host cannot run the provider or listen
            """.formatted(DEFAULT_CONNECTIONS, DEFAULT_PORT);

    private Doctor() {
    }

    /** Held so the level sticks: JUL keeps loggers weakly. */
    private static final java.util.logging.Logger RDMA4J_LOGS = java.util.logging.Logger.getLogger("io.rdma4j");

    public static void main(String[] args) {
        // The doctor prints the provider of each side itself; the transport's INFO line would repeat it.
        RDMA4J_LOGS.setLevel(java.util.logging.Level.WARNING);
        int code = run(args, System.out, System.err);
        System.out.flush();
        // --serve returns only when it fails; it serves from other threads until the process is stopped
        System.exit(code);
    }

    /** Runs the command line; returns the exit code. {@code --serve} blocks until the process is stopped. */
    static int run(String[] args, PrintStream out, PrintStream err) {
        Command command;
        try {
            command = Command.parse(args);
        } catch (IllegalArgumentException e) {
            err.println("rdma4j doctor: " + e.getMessage());
            err.print(USAGE);
            return ExitCode.BAD_ARGUMENTS;
        }
        if (command.help()) {
            out.print(USAGE);
            return ExitCode.OK;
        }
        TransportConfig config;
        try {
            config = TransportConfig.fromProperties(command.options(), "");
        } catch (IllegalArgumentException e) {
            err.println("rdma4j doctor: " + e.getMessage());
            return ExitCode.BAD_ARGUMENTS;
        }
        return switch (command.mode()) {
            case REPORT -> report(config, command.connections(), out);
            case SERVE -> FabricServer.serve(config, command.target(), out, err);
            case PING -> FabricPing.ping(config, command.target(), command.latencyReads(), command.bandwidthSeconds(), out, err);
        };
    }

    private static int report(TransportConfig config, int connections, PrintStream out) {
        out.print(report(config, connections));
        try {
            RdmaTransport.explain(config);
            return ExitCode.OK;
        } catch (ProviderUnavailableException e) {
            return ExitCode.CANNOT_RUN_HERE;
        } catch (IllegalArgumentException e) {
            return ExitCode.BAD_ARGUMENTS;
        }
    }

    /** The whole report as text, its memlock section for {@link #DEFAULT_CONNECTIONS} connections. */
    public static String report(TransportConfig config) {
        return report(config, DEFAULT_CONNECTIONS);
    }

    /** The whole report as text, its memlock section for {@code connections} verbs connections. */
    public static String report(TransportConfig config, int connections) {
        return RdmaTransportFactory.loaded().doctorReport(config, connections);
    }

    enum Mode { REPORT, SERVE, PING }

    /** The parsed command line. */
    record Command(Mode mode, String target, Map<String, String> options, int latencyReads, double bandwidthSeconds,
                   int connections, boolean help) {

        static Command parse(String[] args) {
            Mode mode = Mode.REPORT;
            String target = null;
            Map<String, String> options = new LinkedHashMap<>();
            int latencyReads = 1000;
            double bandwidthSeconds = 2;
            int connections = DEFAULT_CONNECTIONS;
            boolean help = false;
            for (int i = 0; i < args.length; i++) {
                String arg = args[i];
                if (arg.equals("--serve") || arg.equals("--ping")) {
                    if (mode != Mode.REPORT) {
                        throw new IllegalArgumentException("give one of --serve and --ping");
                    }
                    mode = arg.equals("--serve") ? Mode.SERVE : Mode.PING;
                    boolean hasValue = i + 1 < args.length && !args[i + 1].startsWith("-") && args[i + 1].indexOf('=') < 0;
                    if (hasValue) {
                        target = args[++i];
                    } else if (mode == Mode.PING) {
                        throw new IllegalArgumentException("--ping needs the server, e.g. --ping 10.0.0.5 or --ping 10.0.0.5:"
                                + DEFAULT_PORT);
                    }
                } else if (arg.startsWith("--latency-reads=")) {
                    latencyReads = positive(arg, 1_000_000);
                } else if (arg.startsWith("--connections=")) {
                    connections = positive(arg, 1_000_000);
                } else if (arg.startsWith("--bandwidth-seconds=")) {
                    bandwidthSeconds = seconds(arg);
                } else if (arg.equals("--help") || arg.equals("-h")) {
                    help = true;
                } else if (arg.equals("--exit")) {
                    continue; // the samples' exec runner passes it to every demo
                } else if (arg.startsWith("-")) {
                    throw new IllegalArgumentException("unknown option '" + arg + "'");
                } else {
                    int eq = arg.indexOf('=');
                    if (eq <= 0) {
                        throw new IllegalArgumentException("arguments are key=value transport options, e.g. device=mlx5_0;"
                                + " got '" + arg + "'");
                    }
                    String key = arg.substring(0, eq);
                    if (!TRANSPORT_KEYS.contains(key) && key.indexOf('.') <= 0) {
                        throw new IllegalArgumentException("unknown transport option '" + key + "'; known: "
                                + String.join(", ", TRANSPORT_KEYS.stream().sorted().toList()) + ", tcp.*, verbs.*");
                    }
                    options.put(key, arg.substring(eq + 1));
                }
            }
            return new Command(mode, target, options, latencyReads, bandwidthSeconds, connections, help);
        }

        private static int positive(String arg, int max) {
            String v = arg.substring(arg.indexOf('=') + 1);
            try {
                int n = Integer.parseInt(v);
                if (n >= 1 && n <= max) {
                    return n;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw new IllegalArgumentException(arg + ": give a whole number from 1 to " + max);
        }

        private static double seconds(String arg) {
            String v = arg.substring(arg.indexOf('=') + 1);
            try {
                double s = Double.parseDouble(v);
                if (s > 0 && s <= 600) {
                    return s;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw new IllegalArgumentException(arg + ": give seconds above 0 and at most 600, e.g. 2 or 0.5");
        }
    }
}
