package io.rdma4j.nativeloader.discovery;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * Which soft-RDMA kernel modules this host's kernel has (loaded, built in, or installed under
 * {@code /lib/modules/<release>}), read below a root ("/" on a real host, a fixture tree in tests), so that the
 * doctor advises {@code modprobe rdma_rxe} only where it can work.
 *
 * @param release   the running kernel's release ({@code /proc/sys/kernel/osrelease}); empty when unknown
 * @param moduleDir whether {@code /lib/modules/<release>} exists
 * @param available the soft-RDMA modules ({@link #RXE}, {@link #SIW}) this kernel can load
 */
public record KernelModules(Optional<String> release, boolean moduleDir, Set<String> available) {

    /** Soft-RoCE. */
    public static final String RXE = "rdma_rxe";
    /** Soft-iWARP. */
    public static final String SIW = "siw";
    private static final List<String> SOFT_RDMA = List.of(RXE, SIW);

    public KernelModules {
        available = Set.copyOf(available);
    }

    /** Nothing known (no {@code /proc}): advice assumes the modules may exist. */
    public static KernelModules unknown() {
        return new KernelModules(Optional.empty(), false, Set.of());
    }

    /** Reads the host below {@code root}. */
    public static KernelModules scan(Path root) {
        Optional<String> release = Sysfs.read(root.resolve("proc/sys/kernel/osrelease")).filter(r -> !r.isEmpty());
        if (release.isEmpty()) {
            return unknown();
        }
        Set<String> found = new TreeSet<>();
        for (String m : SOFT_RDMA) {
            if (Files.isDirectory(root.resolve("sys/module").resolve(m))) {
                found.add(m); // loaded (or built in)
            }
        }
        Path dir = root.resolve("lib/modules").resolve(release.get());
        boolean dirPresent = Files.isDirectory(dir);
        if (dirPresent) {
            found.addAll(listed(dir));
        }
        return new KernelModules(release, dirPresent, found);
    }

    /** Whether it is known that this kernel cannot load {@code module}. */
    public boolean lacks(String module) {
        return release.isPresent() && !available.contains(module);
    }

    /** One line for the report. */
    public String describe() {
        if (release.isEmpty()) {
            return "unknown (no /proc/sys/kernel/osrelease)";
        }
        String which = available.isEmpty() ? "no rdma_rxe or siw" : String.join(", ", new TreeSet<>(available));
        return which + " for kernel " + release.get()
                + (moduleDir ? "" : " (no /lib/modules/" + release.get() + ")");
    }

    /** Soft-RDMA modules named in modules.dep / modules.builtin, or as files when neither index exists. */
    private static Set<String> listed(Path dir) {
        Set<String> found = new TreeSet<>();
        List<Path> indexes = Stream.of("modules.dep", "modules.builtin").map(dir::resolve).filter(Files::isRegularFile).toList();
        try {
            if (indexes.isEmpty()) {
                try (Stream<Path> files = Files.walk(dir, 16)) {
                    files.forEach(f -> module(f.getFileName().toString()).ifPresent(found::add));
                }
            }
            for (Path index : indexes) {
                try (Stream<String> lines = Files.lines(index)) {
                    lines.forEach(line -> {
                        int colon = line.indexOf(':');
                        String path = colon < 0 ? line.strip() : line.substring(0, colon);
                        module(path.substring(path.lastIndexOf('/') + 1)).ifPresent(found::add);
                    });
                }
            }
        } catch (IOException | UncheckedIOException e) {
            // an unreadable tree tells nothing: report what was found so far
        }
        return found;
    }

    /** {@code rdma_rxe.ko}, {@code siw.ko.xz}, ... to the module's name, if it is a soft-RDMA one. */
    private static Optional<String> module(String fileName) {
        int ko = fileName.indexOf(".ko");
        if (ko <= 0 || !(fileName.length() == ko + 3 || fileName.charAt(ko + 3) == '.')) {
            return Optional.empty();
        }
        String name = fileName.substring(0, ko).replace('-', '_');
        return SOFT_RDMA.contains(name) ? Optional.of(name) : Optional.empty();
    }
}
