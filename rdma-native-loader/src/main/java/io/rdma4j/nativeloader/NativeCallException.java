package io.rdma4j.nativeloader;

/** A native call failed with an errno that has no benign meaning. */
public final class NativeCallException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final String function;
    private final int errno;

    public NativeCallException(String function, int errno) {
        super(function + " failed: " + Errno.name(errno) + " (" + errno + ")");
        this.function = function;
        this.errno = errno;
    }

    public String function() {
        return function;
    }

    public int errno() {
        return errno;
    }
}
