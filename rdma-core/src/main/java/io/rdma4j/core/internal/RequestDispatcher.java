package io.rdma4j.core.internal;

import io.rdma4j.core.Peer;
import io.rdma4j.core.ProtocolException;
import io.rdma4j.core.RemoteRequestException;
import io.rdma4j.core.RequestContext;
import io.rdma4j.core.RequestHandler;
import io.rdma4j.core.RequestHandlers;
import io.rdma4j.core.RequestRefusedException;
import io.rdma4j.core.spi.ProviderConnection;

import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The serving side of a connection's request/reply channel: hands the peer's requests to this side's
 * handlers and sends their replies. A peer may have at most max-outstanding-operations requests in the
 * handlers at once; further requests get a {@link RemoteRequestException.Status#BUSY} reply and the
 * connection stays open.
 */
final class RequestDispatcher {

    /** Under the connection's name: operators configure one logger per connection. */
    private static final System.Logger LOG = System.getLogger(DefaultConnection.class.getName());

    private final DefaultConnection connection;
    private final ProviderConnection pc;
    private final DefaultRdmaTransport transport;
    private final RequestHandlers handlers;
    private final Peer peer;
    /** The peer's requests this side's handlers have not answered yet. */
    private final AtomicInteger serving = new AtomicInteger();
    /** The peer's requests whose replies are not sent yet (BUSY and UNKNOWN_TYPE replies included). */
    private final AtomicInteger unanswered = new AtomicInteger();

    RequestDispatcher(DefaultConnection connection, ProviderConnection pc, DefaultRdmaTransport transport,
                      RequestHandlers handlers, Peer peer) {
        this.connection = connection;
        this.pc = pc;
        this.transport = transport;
        this.handlers = handlers;
        this.peer = peer;
    }

    /**
     * A peer's request, on the provider's thread. Its handler runs right here where the provider hands reading to
     * another thread first (the tcp provider does: no thread has to be woken before the handler runs), else on a
     * completion thread; never on a thread that still reads the connection.
     */
    void serve(MessageHeader header, ByteBuffer body) {
        unanswered.incrementAndGet();
        RequestHandler handler = handlers.handler(header.type());
        if (handler == null) {
            replyLater(MessageHeader.errorReply(header.type(), header.correlationId(), RemoteRequestException.Status.UNKNOWN_TYPE,
                    "no handler for request type 0x" + Integer.toHexString(header.type()) + " at " + pc.localAddress()
                            + "; check that the peer runs the component that serves it"), 0);
            return;
        }
        int limit = transport.config().maxOutstandingOperations();
        if (serving.incrementAndGet() > limit) {
            serving.decrementAndGet();
            replyLater(MessageHeader.errorReply(header.type(), header.correlationId(), RemoteRequestException.Status.BUSY,
                    "more than " + limit + " requests of this connection are in progress; wait for replies before sending more"), 0);
            return;
        }
        ByteBuffer request = body.asReadOnlyBuffer();
        Runnable handle = () -> {
            CompletionStage<ByteBuffer> reply;
            try {
                reply = handler.handle(request, new RequestContext(header.type(), peer, connection));
                if (reply == null) {
                    reply = CompletableFuture.failedFuture(new NullPointerException("the handler returned no reply stage"));
                }
            } catch (Throwable e) {
                reply = CompletableFuture.failedFuture(e);
            }
            Thread handling = Thread.currentThread();
            reply.whenComplete((answer, error) -> {
                Runnable send = () -> {
                    serving.decrementAndGet();
                    ByteBuffer framed = replyTo(header, answer, error);
                    connection.sendFramed(framed, framed.remaining() - MessageHeader.SIZE, false).whenComplete((v, sendFailure) -> {
                        unanswered.decrementAndGet();
                        if (sendFailure != null) {
                            LOG.log(System.Logger.Level.DEBUG, "reply to " + peer.address() + " not sent: " + sendFailure);
                        }
                    });
                };
                // A reply the handler had ready goes out from its thread; one completed later by some other thread
                // (perhaps the application's own) is handed back to a completion thread.
                if (Thread.currentThread() == handling) {
                    send.run();
                } else {
                    transport.completions().execute(send);
                }
            });
        };
        if (pc.handOffReading()) {
            handle.run();
        } else {
            transport.completions().execute(handle);
        }
    }

    private void replyLater(ByteBuffer framed, int bodySize) {
        transport.completions().execute(() -> connection.sendFramed(framed, bodySize, false)
                .whenComplete((v, sendFailure) -> unanswered.decrementAndGet()));
    }

    /** Requests of the peer not answered on the wire yet; providers stop reading from the peer beyond their bound. */
    int unanswered() {
        return unanswered.get();
    }

    /** The framed reply to a handler's outcome; failures become error replies that reveal no internals. */
    private ByteBuffer replyTo(MessageHeader request, ByteBuffer answer, Throwable error) {
        int type = request.type();
        long id = request.correlationId();
        String what = "request of type 0x" + Integer.toHexString(type) + " from " + peer.address();
        if (error != null) {
            Throwable cause = Futures.unwrap(error);
            if (cause instanceof RequestRefusedException || cause instanceof ProtocolException) {
                return MessageHeader.errorReply(type, id, RemoteRequestException.Status.REFUSED, String.valueOf(cause.getMessage()));
            }
            LOG.log(System.Logger.Level.WARNING, "the handler of a " + what + " failed", cause);
            return MessageHeader.errorReply(type, id, RemoteRequestException.Status.HANDLER_FAILED, "the handler failed ("
                    + cause.getClass().getSimpleName() + "); its details are in the serving side's log");
        }
        if (answer == null) {
            LOG.log(System.Logger.Level.WARNING, "the handler of a " + what + " completed with no reply");
            return MessageHeader.errorReply(type, id, RemoteRequestException.Status.HANDLER_FAILED,
                    "the handler completed with no reply; its details are in the serving side's log");
        }
        int max = transport.config().maxMessageSize();
        if (answer.remaining() > max) {
            LOG.log(System.Logger.Level.WARNING, "the reply of " + answer.remaining() + " bytes to a " + what
                    + " exceeds max-message-size " + max);
            return MessageHeader.errorReply(type, id, RemoteRequestException.Status.TOO_LARGE, "the reply of "
                    + answer.remaining() + " bytes exceeds the serving side's max-message-size " + max);
        }
        return MessageHeader.frame(MessageHeader.REPLY, MessageHeader.OK, type, id, answer);
    }
}
