package io.rdma4j.core.doctor;

/** The doctor's exit statuses, for scripts; its usage lists them too. */
public final class ExitCode {

    /** Everything worked (the report printed; the ping's reads were verified). */
    public static final int OK = 0;
    /** An unexpected failure; the message says what happened. */
    public static final int FAILED = 1;
    /** The command line is wrong; the usage is printed. */
    public static final int BAD_ARGUMENTS = 2;
    /** The server could not be reached: unknown host, refused, timed out, or no doctor server (or another provider) there. */
    public static final int CANNOT_CONNECT = 3;
    /** The server and the pinger do not share a secret (or a TLS trust). */
    public static final int AUTHENTICATION_FAILED = 4;
    /** Connected, but reads failed or returned other bytes than the server published. */
    public static final int READS_FAILED = 5;
    /** This host cannot run the configured provider, or cannot listen on the address. */
    public static final int CANNOT_RUN_HERE = 6;

    private ExitCode() {
    }
}
