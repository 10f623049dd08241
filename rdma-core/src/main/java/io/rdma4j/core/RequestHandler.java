package io.rdma4j.core;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.BiFunction;

/**
 * Answers one type of request on a listener's connections (see {@link RequestHandlers}). Never runs on a thread
 * that reads a connection (on tcp: the thread that read the request, after it handed reading to another; else a
 * completion thread), so it may block; it may also answer later by completing the returned stage. The reply body must fit {@link TransportConfig#maxMessageSize()}.
 *
 * <p>Throw (or complete exceptionally with) {@link RequestRefusedException} or {@link ProtocolException} to
 * refuse a request: the requester gets a {@link RemoteRequestException} with
 * {@link RemoteRequestException.Status#REFUSED} and the exception's message. Any other failure is logged here
 * and reaches the requester as {@link RemoteRequestException.Status#HANDLER_FAILED} naming only the exception's
 * class, so no internals travel on the wire.
 */
@FunctionalInterface
public interface RequestHandler {

    /**
     * The reply to {@code body} (a read-only buffer the handler may keep). {@code context} says who asks:
     * authorization decisions belong here.
     */
    CompletionStage<ByteBuffer> handle(ByteBuffer body, RequestContext context);

    /** A handler that computes its reply in the calling thread. */
    static RequestHandler answering(BiFunction<ByteBuffer, RequestContext, ByteBuffer> reply) {
        return (body, context) -> CompletableFuture.completedFuture(reply.apply(body, context));
    }
}
