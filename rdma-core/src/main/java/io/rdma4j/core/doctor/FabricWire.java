package io.rdma4j.core.doctor;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What the doctor's {@code --serve} and {@code --ping} agree on: the test region's content, the hello request's
 * {@code key=value} lines, and {@code HOST[:PORT]} arguments.
 */
final class FabricWire {

    /** The test region: large enough for 1 MiB reads at several offsets. */
    static final long REGION_BYTES = 8L << 20;
    static final String VERSION = "1";

    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private FabricWire() {
    }

    /** Fills {@code memory} (a multiple of 8 bytes) with the test pattern: distinct words, so a shifted read shows. */
    static void fill(MemorySegment memory) {
        for (long i = 0; i + 8 <= memory.byteSize(); i += 8) {
            memory.set(WORD, i, (i >>> 3) * 0x9E3779B97F4A7C15L + 0x5DEECE66DL);
        }
    }

    static ByteBuffer encode(Map<String, String> fields) {
        StringBuilder text = new StringBuilder();
        fields.forEach((k, v) -> text.append(k).append('=').append(v.replace('\n', ' ')).append('\n'));
        return ByteBuffer.wrap(text.toString().getBytes(StandardCharsets.UTF_8));
    }

    static Map<String, String> decode(ByteBuffer body) {
        byte[] bytes = new byte[body.remaining()];
        body.get(bytes);
        Map<String, String> fields = new LinkedHashMap<>();
        for (String line : new String(bytes, StandardCharsets.UTF_8).split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                fields.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        return fields;
    }

    /** This host's name for the output, or its address when it has none. */
    static String hostName() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            return "localhost";
        }
    }

    /**
     * {@code HOST}, {@code HOST:PORT}, {@code :PORT}, {@code [IPv6]:PORT}; an empty host is {@code emptyHost}, a
     * missing port {@link Doctor#DEFAULT_PORT}. The result is unresolved: callers resolve and report themselves.
     */
    static InetSocketAddress parse(String target, String emptyHost) {
        String host = target;
        int port = Doctor.DEFAULT_PORT;
        if (target.startsWith("[")) {
            int close = target.indexOf(']');
            if (close < 0) {
                throw new IllegalArgumentException("'" + target + "': an IPv6 address needs a closing ], e.g. [fd00::5]:"
                        + Doctor.DEFAULT_PORT);
            }
            host = target.substring(1, close);
            String rest = target.substring(close + 1);
            if (!rest.isEmpty()) {
                if (!rest.startsWith(":")) {
                    throw new IllegalArgumentException("'" + target + "': expected [ADDRESS]:PORT");
                }
                port = port(target, rest.substring(1));
            }
        } else {
            int colon = target.lastIndexOf(':');
            if (colon >= 0 && target.indexOf(':') == colon) {
                host = target.substring(0, colon);
                port = port(target, target.substring(colon + 1));
            }
        }
        return InetSocketAddress.createUnresolved(host.isEmpty() ? emptyHost : host, port);
    }

    private static int port(String target, String port) {
        try {
            int p = Integer.parseInt(port);
            if (p >= 0 && p <= 65535) {
                return p;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("'" + target + "': the port must be a number from 0 to 65535");
    }

    /** How the output names a READ on this provider: only verbs does RDMA. */
    static String readKind(String provider) {
        return switch (provider) {
            case "verbs" -> "RDMA READ";
            case "tcp" -> "one-sided READ emulated over TCP (tcp provider, not RDMA)";
            default -> provider + " READ";
        };
    }
}
