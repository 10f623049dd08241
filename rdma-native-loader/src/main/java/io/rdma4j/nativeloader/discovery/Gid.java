package io.rdma4j.nativeloader.discovery;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Optional;

/**
 * One entry of a port's GID table.
 *
 * @param index  the GID index (what {@code ibv_query_gid} and {@code ah_attr.grh.sgid_index} take)
 * @param bytes  the 16 GID bytes in network order
 * @param type   from {@code gid_attrs/types/<index>} ({@link GidType#UNKNOWN} when the file is missing)
 * @param netdev from {@code gid_attrs/ndevs/<index>} (RoCE only)
 */
public record Gid(int index, byte[] bytes, GidType type, Optional<String> netdev) {

    public Gid {
        if (bytes.length != 16) {
            throw new IllegalArgumentException("a GID has 16 bytes, got " + bytes.length);
        }
        bytes = bytes.clone();
    }

    /** Parses the sysfs form {@code fe80:0000:0000:0000:0202:c9ff:fe00:0001}. */
    public static Gid parse(int index, String sysfs, GidType type, Optional<String> netdev) {
        String hex = sysfs.trim().replace(":", "");
        if (hex.length() != 32) {
            throw new IllegalArgumentException("not a GID: " + sysfs);
        }
        return new Gid(index, HexFormat.of().parseHex(hex), type, netdev);
    }

    @Override
    public byte[] bytes() {
        return bytes.clone();
    }

    /** Whether a GID as sysfs prints it ({@code 0000:0000:...}) is all zeros: an empty table entry. */
    public static boolean isZero(String sysfs) {
        for (int i = 0; i < sysfs.length(); i++) {
            char c = sysfs.charAt(i);
            if (c != '0' && c != ':' && !Character.isWhitespace(c)) {
                return false;
            }
        }
        return true;
    }

    public boolean isZero() {
        for (byte b : bytes) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    /** The IPv4 address of an IPv4-mapped GID ({@code ::ffff:a.b.c.d}), as RoCE uses for IPv4. */
    public Optional<Inet4Address> ipv4() {
        for (int i = 0; i < 10; i++) {
            if (bytes[i] != 0) {
                return Optional.empty();
            }
        }
        if (bytes[10] != (byte) 0xff || bytes[11] != (byte) 0xff) {
            return Optional.empty();
        }
        try {
            return Optional.of((Inet4Address) InetAddress.getByAddress(Arrays.copyOfRange(bytes, 12, 16)));
        } catch (UnknownHostException e) {
            throw new AssertionError(e); // 4 bytes are always a valid address
        }
    }

    /** The first six bytes as a MAC ("00:07:43:3a:5e:60"): iWARP devices build GID 0 from the MAC. */
    public String macPrefix() {
        return HexFormat.ofDelimiter(":").formatHex(bytes, 0, 6);
    }

    /** fe80::/10: derived from the MAC, present on every RoCE port, not routable. */
    public boolean isLinkLocal() {
        return bytes[0] == (byte) 0xfe && (bytes[1] & 0xc0) == 0x80;
    }

    /** True when this GID carries {@code address} (IPv4 as ::ffff:a.b.c.d, IPv6 as is). */
    public boolean matches(InetAddress address) {
        if (address instanceof Inet4Address v4) {
            return ipv4().map(v4::equals).orElse(false);
        }
        if (address instanceof Inet6Address v6) {
            return Arrays.equals(bytes, v6.getAddress());
        }
        return false;
    }

    /** RFC 5952 text: {@code ::ffff:10.9.9.1}, {@code fe80::202:c9ff:fe00:1}. */
    public String address() {
        Optional<Inet4Address> v4 = ipv4();
        if (v4.isPresent()) {
            return "::ffff:" + v4.get().getHostAddress();
        }
        int[] w = new int[8];
        for (int i = 0; i < 8; i++) {
            w[i] = ((bytes[2 * i] & 0xff) << 8) | (bytes[2 * i + 1] & 0xff);
        }
        int bestStart = -1;
        int bestLen = 1; // RFC 5952: never compress a single zero word
        for (int i = 0; i < 8; ) {
            if (w[i] != 0) {
                i++;
                continue;
            }
            int j = i;
            while (j < 8 && w[j] == 0) {
                j++;
            }
            if (j - i > bestLen) {
                bestStart = i;
                bestLen = j - i;
            }
            i = j;
        }
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            if (i == bestStart) {
                sb.append("::");
                i += bestLen - 1;
                continue;
            }
            if (sb.length() > 0 && sb.charAt(sb.length() - 1) != ':') {
                sb.append(':');
            }
            sb.append(Integer.toHexString(w[i]));
        }
        return sb.toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Gid g && g.index == index && Arrays.equals(g.bytes, bytes) && g.type == type
                && g.netdev.equals(netdev);
    }

    @Override
    public int hashCode() {
        return 31 * (31 * (31 * index + Arrays.hashCode(bytes)) + type.hashCode()) + netdev.hashCode();
    }

    @Override
    public String toString() {
        return "GID " + index + " " + address() + " " + type + netdev.map(n -> " " + n).orElse("");
    }
}
