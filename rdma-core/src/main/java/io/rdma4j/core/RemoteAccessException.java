package io.rdma4j.core;

/** The peer (or the local pre-check) refused a one-sided operation on a region. */
public class RemoteAccessException extends RdmaException {

    /** Why access was refused. */
    public enum Reason {
        /** No live region has this key: forged, or revoked by deregistration (stale). */
        UNKNOWN_KEY,
        /** Offset or length outside the registered region, negative, or overflowing. */
        OUT_OF_RANGE,
        /** The region does not grant the right, e.g. a write to a region registered read-only. */
        ACCESS_DENIED,
        /** The request is larger than the responder accepts in one operation. */
        TOO_LARGE,
        /** The responder failed while serving (its region went away mid-transfer, say). */
        RESPONDER_ERROR;

        public byte code() {
            return (byte) (ordinal() + 1);
        }

        public static Reason fromCode(int code) {
            Reason[] all = values();
            return code >= 1 && code <= all.length ? all[code - 1] : RESPONDER_ERROR;
        }
    }

    private final Reason reason;

    public RemoteAccessException(Reason reason, String message) {
        super(reason + ": " + message);
        this.reason = reason;
    }

    public Reason reason() {
        return reason;
    }
}
