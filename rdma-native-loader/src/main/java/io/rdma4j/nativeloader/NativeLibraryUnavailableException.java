package io.rdma4j.nativeloader;

/**
 * Thrown when libibverbs or librdmacm cannot be loaded. The message names the packages to install,
 * because that is nearly always the fix.
 */
public final class NativeLibraryUnavailableException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** Packages that provide the runtime libraries and the user-space drivers (providers). */
    public static final String INSTALL_ADVICE =
            "install the RDMA user-space libraries: Debian/Ubuntu `apt-get install libibverbs1 librdmacm1 ibverbs-providers`,"
                    + " RHEL/Fedora `dnf install rdma-core libibverbs librdmacm`";

    private final String library;

    public NativeLibraryUnavailableException(String library, Throwable cause) {
        super("cannot load " + library + ": " + INSTALL_ADVICE, cause);
        this.library = library;
    }

    /** The soname that failed to load, e.g. {@code libibverbs.so.1}. */
    public String library() {
        return library;
    }
}
