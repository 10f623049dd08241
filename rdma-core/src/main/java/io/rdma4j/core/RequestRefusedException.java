package io.rdma4j.core;

/**
 * Thrown by a {@link RequestHandler} to refuse a request; its message travels to the requester as the
 * reason of a {@link RemoteRequestException.Status#REFUSED} reply, so it must say what the requester should
 * change and nothing the requester must not learn.
 */
public class RequestRefusedException extends RdmaException {
    public RequestRefusedException(String reason) {
        super(reason);
    }
}
