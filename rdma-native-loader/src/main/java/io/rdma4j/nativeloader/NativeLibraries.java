package io.rdma4j.nativeloader;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.util.Objects;

/**
 * Loads libibverbs and librdmacm by soname (the runtime packages ship only {@code .so.1}, never the
 * unversioned dev symlink). Call {@link #require()} before touching anything in
 * {@code io.rdma4j.nativeloader.bindings}: the generated classes look the libraries up in their static
 * initialisers and would otherwise fail with a bare {@link ExceptionInInitializerError}.
 */
public final class NativeLibraries {

    public static final String LIBIBVERBS = "libibverbs.so.1";
    public static final String LIBRDMACM = "librdmacm.so.1";

    private static volatile NativeLibraries loaded;

    private final SymbolLookup verbs;
    private final SymbolLookup rdmacm;

    private NativeLibraries(SymbolLookup verbs, SymbolLookup rdmacm) {
        this.verbs = verbs;
        this.rdmacm = rdmacm;
    }

    /**
     * Loads both libraries once per JVM. Loaded libraries stay mapped for the JVM's lifetime
     * ({@link Arena#global()}), as the generated bindings expect.
     *
     * @throws NativeLibraryUnavailableException naming the packages to install
     */
    public static NativeLibraries require() {
        NativeLibraries l = loaded;
        if (l == null) {
            synchronized (NativeLibraries.class) {
                l = loaded;
                if (l == null) {
                    l = load(LIBIBVERBS, LIBRDMACM, Arena.global());
                    loaded = l;
                }
            }
        }
        return l;
    }

    /** True when both libraries load; never throws. */
    public static boolean isAvailable() {
        try {
            require();
            return true;
        } catch (NativeLibraryUnavailableException e) {
            return false;
        }
    }

    /**
     * Loads the given sonames into {@code arena}. Exposed so that tests can prove the failure message
     * with a name that does not exist.
     */
    public static NativeLibraries load(String verbsSoname, String rdmacmSoname, Arena arena) {
        Objects.requireNonNull(arena, "arena");
        return new NativeLibraries(lookup(verbsSoname, arena), lookup(rdmacmSoname, arena));
    }

    private static SymbolLookup lookup(String soname, Arena arena) {
        try {
            return SymbolLookup.libraryLookup(soname, arena);
        } catch (IllegalArgumentException e) { // what libraryLookup throws when dlopen fails
            throw new NativeLibraryUnavailableException(soname, e);
        }
    }

    public SymbolLookup verbs() {
        return verbs;
    }

    public SymbolLookup rdmacm() {
        return rdmacm;
    }
}
