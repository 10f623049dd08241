package io.rdma4j.core;

/**
 * An operation, connect or wait for back-pressure did not finish in its configured time. An
 * operation that times out also closes its connection: a peer that does not answer within the
 * operation timeout is treated as dead, which guarantees no late data lands in the sink afterwards.
 */
public class RdmaTimeoutException extends RdmaException {
    public RdmaTimeoutException(String message) {
        super(message);
    }
}
