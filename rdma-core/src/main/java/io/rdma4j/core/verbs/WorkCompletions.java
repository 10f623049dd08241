package io.rdma4j.core.verbs;

import io.rdma4j.core.ConnectionClosedException;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RdmaException;
import io.rdma4j.core.RemoteAccessException;
import io.rdma4j.nativeloader.Verbs;

/** Turns a failed work completion status ({@code enum ibv_wc_status}) into the exception callers see. */
final class WorkCompletions {

    // enum ibv_wc_status values (verbs.h); WorkCompletionsTest checks them against the generated bindings.
    static final int SUCCESS = 0;
    static final int LOC_LEN_ERR = 1;
    static final int LOC_QP_OP_ERR = 2;
    static final int LOC_PROT_ERR = 4;
    static final int WR_FLUSH_ERR = 5;
    static final int LOC_ACCESS_ERR = 8;
    static final int REM_INV_REQ_ERR = 9;
    static final int REM_ACCESS_ERR = 10;
    static final int REM_OP_ERR = 11;
    static final int RETRY_EXC_ERR = 12;
    static final int RNR_RETRY_EXC_ERR = 13;
    static final int REM_ABORT_ERR = 16;

    private WorkCompletions() {
    }

    /**
     * The exception for a failed completion. {@code statusName} is what {@code ibv_wc_status_str} says.
     * A NIC reports a bad key, a range outside the region and a missing right all as one remote access
     * error, so the reason is {@link RemoteAccessException.Reason#ACCESS_DENIED} and the message carries
     * the status.
     */
    static RdmaException exception(int status, String statusName, String operation, String peer) {
        String what = operation + " to " + peer + " failed: " + statusName + " (IBV_WC status " + status + ")";
        return switch (status) {
            case REM_ACCESS_ERR, REM_INV_REQ_ERR -> new RemoteAccessException(RemoteAccessException.Reason.ACCESS_DENIED,
                    what + "; the peer's NIC refused the key, range or right (it cannot tell which)");
            case WR_FLUSH_ERR -> new ConnectionClosedException(what + "; the queue pair was closed or failed before it ran");
            case RETRY_EXC_ERR, RNR_RETRY_EXC_ERR -> new ConnectionClosedException(what + "; the peer stopped answering");
            case REM_ABORT_ERR, REM_OP_ERR -> new ConnectionClosedException(what + "; the peer aborted the connection");
            default -> new RdmaException(what);
        };
    }

    /**
     * Why a receive that failed with {@code status} ends the connection: a {@link ProtocolException} for a message
     * larger than the slot, else the failure; null for a flush on iWARP, where a refusal already ends the connection
     * (TERMINATE, then the CM disconnect).
     */
    static RdmaException receiveFailure(int status, boolean iwarp, int slotSize, String peer) {
        if (status == WR_FLUSH_ERR && iwarp) {
            return null;
        }
        // A flushed receive while open means the QP entered the error state on its own: as a responder
        // after refusing a peer's one-sided request (which never completes here), or after an
        // asynchronous error. Disconnect at once, so the peer learns it now, not at its operation timeout.
        if (status == LOC_LEN_ERR || status == LOC_QP_OP_ERR) {
            // what a receive reports for an incoming SEND longer than its buffer (Soft-RoCE: the latter)
            return new ProtocolException("peer sent a message that does not fit this side's receive slot of "
                    + slotSize + " bytes (" + Verbs.completionStatus(status) + "): it ignores this side's max-message-size");
        }
        return new ConnectionClosedException("receive from " + peer + " failed: " + Verbs.completionStatus(status)
                + (status == WR_FLUSH_ERR ? " (the queue pair entered the error state)" : ""));
    }
}
