package io.rdma4j.nativeloader.discovery;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** Small helpers for reading sysfs attribute files (one value, trailing newline). */
final class Sysfs {

    private Sysfs() {
    }

    /** The file's trimmed content, or empty when missing or unreadable (sysfs returns EINVAL for unused GID attrs). */
    static Optional<String> read(Path file) {
        try {
            return Optional.of(Files.readString(file).trim());
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    /** "4: ACTIVE" to "ACTIVE"; a value without a colon is returned trimmed. */
    static String afterColon(String value) {
        int i = value.indexOf(':');
        return (i < 0 ? value : value.substring(i + 1)).trim();
    }

    /** Names of the entries of a directory, sorted; empty when it does not exist. */
    static List<String> list(Path dir) {
        List<String> names = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return names;
        }
        try (DirectoryStream<Path> s = Files.newDirectoryStream(dir)) {
            for (Path p : s) {
                names.add(p.getFileName().toString());
            }
        } catch (IOException e) {
            return List.of();
        }
        names.sort(Sysfs::naturalOrder);
        return names;
    }

    /** Numeric names in numeric order ("2" before "10"), others lexically after. */
    static int naturalOrder(String a, String b) {
        boolean na = isNumber(a);
        boolean nb = isNumber(b);
        if (na && nb) {
            // without leading zeros, the shorter number is the smaller; no parsing (a GID table has 1024 names)
            return a.length() != b.length() ? Integer.compare(a.length(), b.length()) : a.compareTo(b);
        }
        return na ? -1 : nb ? 1 : a.compareTo(b);
    }

    /** Digits only, without a leading zero (except "0" itself): sysfs index names. */
    static boolean isNumber(String s) {
        if (s.isEmpty() || s.length() > 18 || (s.length() > 1 && s.charAt(0) == '0')) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) < '0' || s.charAt(i) > '9') {
                return false;
            }
        }
        return true;
    }
}
